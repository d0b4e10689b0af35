"""`recall-eval compare A B [C ...]`: parse, call recall_eval.api.compare, print the compare report's path.

The reuse policy and run identity live in recall_eval.api.comparing; the variant syntax in
recall_eval.variants.
"""

from __future__ import annotations

import shlex
import sys
from typing import Annotated

import typer
from rich.markup import escape

from recall_eval import api
from recall_eval.api.gating import scored_comparisons
from recall_eval.api.options import CompareOptions
from recall_eval.cli.app import app, console
from recall_eval.cli.common import open_in_browser, resume_command
from recall_eval.cli.display import ConsoleHooks
from recall_eval.cli.options import takes_options
from recall_eval.errors import UserError
from recall_eval.formatting import score_change_text


@app.command()
@takes_options
def compare(
    variants: Annotated[
        list[str],
        typer.Argument(
            help="Variants: profile overrides (fp8, bf16, topk=1024, fp8,topk=1024, mem=0.8, ctx=32768), "
            "request knobs (effort=high, think=on, think=off), a profile name (dsv4-flash), or both "
            "(dsv4-flash:bf16,topk=1024). With --base-url: labels (knob-only labels still apply their knobs).",
            show_default=False,
        ),
    ],
    options: CompareOptions,
    open_report: Annotated[
        bool, typer.Option("--open", help="Open the compare report in the browser.")
    ] = False,
) -> None:
    """Compare server variants on identical cases: paired recall test (scored suites: score differences,
    Wilcoxon signed-rank), difference heatmaps, throughput.

    The same seed gives every variant the same cases. A finished run with the same cases and target is
    reused (--rerun runs it again), an interrupted one is resumed.

    Exit codes: 0 finished (and every gate met); 1 could not run or stopped early; 2 bad input;
    3 a variant got no answer from a live model; 4 below --fail-under or a --fail-on-regression drop;
    130 interrupted."""
    command = shlex.join(["recall-eval", "compare", *sys.argv[2:]]) if sys.argv[1:2] == ["compare"] else None
    try:
        record = api.compare(variants, options, hooks=ConsoleHooks(console, label_runs=True), command=command)
    except api.RunInterrupted as stop:
        console.print(
            f"[yellow]interrupted[/yellow] in variant {stop.label}: rerun the same compare to resume "
            f"(or {resume_command(stop.run_dir)})",
            highlight=False,
        )
        raise typer.Exit(130) from None
    except api.RunStopped as stop:
        if stop.gave_up:
            raise UserError(f"variant {stop.label!r}: {stop}; rerun the same compare to resume") from stop
        raise UserError(f"variant {stop.label!r}: {stop}", stop.exit_code) from stop
    console.print(f"compare directory: {record.path}", highlight=False)
    for label, scope, test in scored_comparisons(record.labels, record.runs):
        console.print(
            f"{label} vs {record.labels[0]}, {scope}: {score_change_text(test)}",
            markup=False,
            highlight=False,
        )
    print(record.report)
    if open_report:
        open_in_browser(record.report)
    for line in record.verdict.lines:
        console.print(f"[red]{escape(line)}[/red]", highlight=False, soft_wrap=True)
    if record.verdict.exit_code:
        raise typer.Exit(record.verdict.exit_code)
