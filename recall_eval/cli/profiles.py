"""`recall-eval profiles`: the known server profiles and the commands they run."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.console import Console

from recall_eval.api import servers
from recall_eval.api.options import TargetOptions
from recall_eval.cli.app import app
from recall_eval.cli.options import only, takes_options
from recall_eval.errors import BadInput


@app.command()
@takes_options
def profiles(
    target: Annotated[TargetOptions, only("profiles_file")],
    name: Annotated[str | None, typer.Argument(help="Show only this profile.")] = None,
) -> None:
    """List profiles (shipped ones plus ./recall-eval.toml) with their resolved commands and env."""
    known = servers.profiles(target.profiles_file)
    if name is not None and name not in known:
        raise BadInput(f"unknown profile {name!r}; known profiles: {', '.join(sorted(known))}")
    out = Console(soft_wrap=True, highlight=False)
    for profile_name, profile in known.items():
        if name is not None and profile_name != name:
            continue
        head = f"[bold]{profile_name}[/bold] ({profile.engine})"
        out.print(f"{head}: {profile.description}" if profile.description else head)
        settings = (
            f"index_k_dtype={profile.index_k_dtype} index_topk={profile.index_topk or 'model default'} "
            f"tp={profile.tp} mem_fraction_static={profile.mem_fraction_static} "
            f"context_length={profile.context_length} ready_timeout_s={profile.ready_timeout_s:g}"
        )
        out.print(f"  {settings}", markup=False)
        if profile.engine == "external":
            out.print(f"  no process: requests go to {profile.base_url}", markup=False)
        try:
            specs = servers.profile_commands(profile)
        except BadInput as err:
            out.print(f"  [red]cannot launch:[/red] {err}")
            continue
        for spec in specs:
            out.print(f"  [{spec.name}] {spec.url}", markup=False)
            out.print(f"    {spec.command_line()}", markup=False)
        out.print()
