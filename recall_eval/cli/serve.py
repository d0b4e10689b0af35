"""`recall-eval serve PROFILE`: launch a profile's server, print when it is ready, stop it on Ctrl-C."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated

import typer
from rich.text import Text

from recall_eval.api import servers
from recall_eval.api.options import PROFILE_OVERRIDES, ClusterOptions, TargetOptions
from recall_eval.cli.app import app, console
from recall_eval.cli.options import only, takes_options
from recall_eval.errors import UserError


@app.command()
@takes_options
def serve(
    profile: Annotated[
        str, typer.Argument(metavar="PROFILE", help="Profile to launch (see `recall-eval profiles`).")
    ],
    target: Annotated[TargetOptions, only(*PROFILE_OVERRIDES, "profiles_file")],
    cluster: ClusterOptions,
    log_dir: Annotated[
        Path | None,
        typer.Option("--log-dir", help="Where server-*.log go. (default: <runs>/serve/<profile>-<time>)"),
    ] = None,
) -> None:
    """Launch PROFILE, print the ready time and endpoint, and serve until Ctrl-C; then stop every process."""

    def echo(line: str) -> None:
        if line.startswith("ready in "):  # printed below on stdout, where scripts read it
            return
        console.print(Text(line, style="dim"), highlight=False, soft_wrap=True)  # log text is not markup

    try:
        with servers.serve(profile, target, log_dir, echo=echo, cluster=cluster) as serving:
            server, logs = serving.server, serving.log_dir
            try:  # from here Ctrl-C stops cleanly; the endpoint line comes last (scripts wait for it)
                console.print(f"logs in {logs}; Ctrl-C to stop", highlight=False, markup=False)
                print(f"ready in {server.time_to_ready_s:.0f} s", flush=True)
                print(f"endpoint {server.endpoint.base_url} (model {server.endpoint.model})", flush=True)
                while True:
                    death = server.poll_death()
                    if death is not None:
                        line = f"; log: {death.log_line}" if death.log_line else ""
                        raise UserError(
                            f"the server died: {death.outcome}: {death.reason}{line} (logs in {logs})"
                        )
                    time.sleep(0.5)
            except KeyboardInterrupt:
                console.print("stopping...")
    except KeyboardInterrupt:
        console.print("[yellow]interrupted during start-up; stopped[/yellow]")
        raise typer.Exit(130) from None
    console.print("stopped")
