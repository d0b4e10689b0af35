"""`recall-eval profiles`: the known server profiles and the commands they run."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.console import Console
from rich.text import Text

from recall_eval.api import servers
from recall_eval.api.options import TargetOptions
from recall_eval.cli.app import app
from recall_eval.cli.options import only, takes_options
from recall_eval.engines import launched
from recall_eval.errors import BadInput


@app.command()
@takes_options
def profiles(
    target: Annotated[TargetOptions, only("profiles_file")],
    name: Annotated[str | None, typer.Argument(metavar="[NAME]", help="Show only this profile.")] = None,
) -> None:
    """List profiles (shipped ones plus ./recall-eval.toml) with their resolved commands and env."""
    known = servers.profiles(target.profiles_file)
    if name is not None and name not in known:
        raise BadInput(f"unknown profile {name!r}; known profiles: {', '.join(sorted(known))}")
    out = Console(soft_wrap=True, highlight=False)
    for profile_name, profile in known.items():
        if name is not None and profile_name != name:
            continue
        head = Text.assemble((profile_name, "bold"), f" ({profile.engine})")
        if profile.description:
            head.append(f": {profile.description}")
        out.print(head)
        unset = "server default"
        settings = (
            f"index_k_dtype={profile.index_k_dtype} index_topk={profile.index_topk or 'model default'} "
            f"tp={profile.tp} mem_fraction_static={profile.mem_fraction_static or unset} "
            f"context_length={profile.context_length or 'model default'} "
            f"ready_timeout_s={profile.ready_timeout_s:g}"
        )
        if not launched(profile):  # nothing is launched: the settings are the server's own
            settings = "index_k_dtype, index_topk, tp and memory: the running server's own (unknown here)"
        out.print(f"  {settings}", markup=False)
        if not launched(profile):
            out.print(f"  no process: requests go to {profile.base_url}", markup=False)
        else:
            out.print(f"  {servers.kind_line(profile)}", markup=False)
        try:
            specs = servers.profile_commands(profile)
        except BadInput as err:
            out.print(Text.assemble("  ", ("cannot launch:", "red"), f" {err}"))
            continue
        for spec in specs:
            url = spec.url if spec.port else spec.url.rsplit(":", 1)[0] + ":<a free port, picked at launch>"
            out.print(f"  [{spec.name}] {url}", markup=False)
            out.print(f"    {spec.command_line()}", markup=False)
        out.print()
