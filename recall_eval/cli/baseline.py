"""`recall-eval baseline save RUN NAME`: a finished run -> a small baseline file to commit and gate on."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from recall_eval.cli.app import app, say

baseline_app = typer.Typer(
    help="Stored baselines: save a finished run's verdicts as a small file to commit; gate a later "
    "run on it with `recall-eval sweep --baseline FILE`.",
    no_args_is_help=True,
)
app.add_typer(baseline_app, name="baseline")


@baseline_app.command("save")
def save(
    run: Annotated[
        Path, typer.Argument(metavar="RUN", help="A finished run's directory.", show_default=False)
    ],
    name: Annotated[
        str,
        typer.Argument(
            metavar="NAME",
            help="The baseline file to write: NAME.json, or the path given (with a suffix).",
            show_default=False,
        ),
    ],
    tolerance: Annotated[
        str | None,
        typer.Option(
            "--tolerance",
            metavar="DROP",
            help="A drop in recall the baseline accepts (2pp, 0.02): a gate fails only when the drop's "
            "95% interval lies wholly above it (default: 0; sweep --tolerance overrides it).",
        ),
    ] = None,
) -> None:
    """Save a finished run as a baseline: its spec, versions and reuse key, and one line per case (id,
    suite, length, depth, both verdicts); no prompts, answers or secrets. Prints the file's path."""
    from recall_eval.api.baselines import save_baseline
    from recall_eval.baseline_store import read_baseline

    path = save_baseline(run, name, tolerance)
    saved = read_baseline(path)
    say(f"baseline {saved.name}: {len(saved.cases)} cases of run {saved.source_run}")
    print(path)
