"""`recall-eval serve PROFILE`: launch a profile's server, print when it is ready, stop it on Ctrl-C."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated

import typer
from rich.text import Text

from recall_eval.api import TargetOptions
from recall_eval.cli.app import app, console
from recall_eval.errors import UserError
from recall_eval.store import runs_home


def _log_dir(profile_name: str, log_dir: Path | None) -> Path:
    if log_dir is not None:
        return log_dir
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
    return runs_home() / "serve" / f"{profile_name}-{stamp}"


@app.command()
def serve(
    profile: Annotated[
        str, typer.Argument(metavar="PROFILE", help="Profile to launch (see `recall-eval profiles`).")
    ],
    index_k_dtype: Annotated[
        str | None, typer.Option("--index-k-dtype", help="Override: fp8, bf16 or fp4.")
    ] = None,
    index_topk: Annotated[int | None, typer.Option("--index-topk", help="Override: DSA index_topk.")] = None,
    mem_fraction: Annotated[
        float | None, typer.Option("--mem-fraction", help="Override: mem_fraction_static.")
    ] = None,
    context_length: Annotated[
        int | None, typer.Option("--context-length", help="Override: context length.")
    ] = None,
    model_path: Annotated[str | None, typer.Option("--model-path", help="Override: model path.")] = None,
    tp: Annotated[int | None, typer.Option(help="Override: tensor parallel size.")] = None,
    port: Annotated[
        int | None, typer.Option(help="Override: the port clients use (the router's, for PD).")
    ] = None,
    memory_limit_gb: Annotated[
        float | None,
        typer.Option("--memory-limit-gb", help="Override (reference engine): memory cap in GiB."),
    ] = None,
    profiles_file: Annotated[
        Path | None, typer.Option("--profiles-file", help="TOML file with more profiles.")
    ] = None,
    log_dir: Annotated[
        Path | None,
        typer.Option("--log-dir", help="Where server-*.log go. (default: <runs>/serve/<profile>-<time>)"),
    ] = None,
) -> None:
    """Launch PROFILE, print the ready time and endpoint, and serve until Ctrl-C; then stop every process."""
    from launchers.lifecycle import ServerStartError, launch, sigterm_raises_exit
    from launchers.profiles import resolve_profile

    target = TargetOptions(
        index_k_dtype=index_k_dtype,
        index_topk=index_topk,
        mem_fraction_static=mem_fraction,
        context_length=context_length,
        model_path=model_path,
        tp=tp,
        port=port,
    )
    overrides = {**target.profile_overrides(), "memory_limit_gb": memory_limit_gb}
    resolved = resolve_profile(profile, overrides, profiles_file)
    logs = _log_dir(resolved.name, log_dir)

    def echo(line: str) -> None:
        if line.startswith("ready in "):  # printed below on stdout, where scripts read it
            return
        console.print(Text(line, style="dim"), highlight=False, soft_wrap=True)  # log text is not markup

    with sigterm_raises_exit():
        try:
            server = launch(resolved, logs, echo=echo)
        except ServerStartError as err:
            for line in err.tail:
                console.print(Text(f"  {line}", style="dim"), highlight=False, soft_wrap=True)
            raise
        except KeyboardInterrupt:
            console.print("[yellow]interrupted during start-up; stopped[/yellow]")
            raise typer.Exit(130) from None
        with server:
            try:  # from here Ctrl-C stops cleanly; the endpoint line comes last (scripts wait for it)
                console.print(f"logs in {logs}; Ctrl-C to stop", highlight=False)
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
        console.print("stopped")
