"""`recall-eval compare A B [C ...]`: parse, call recall_eval.api.compare, print the compare report's path.

The reuse policy and run identity live in recall_eval.api.comparing; the variant syntax in
recall_eval.variants.
"""

from __future__ import annotations

import shlex
import sys
from typing import Annotated

import typer

from recall_eval import api
from recall_eval.api.options import CompareOptions
from recall_eval.cli.app import app, console, interrupted_exit_code, interrupted_word, say
from recall_eval.cli.options import takes_options
from recall_eval.errors import UserError


def paired_lines(pairs: list[dict]) -> list[str]:
    """One line per variant against the first: the flips each way and the exact McNemar p-value."""
    from recall_eval.formatting import format_p

    lines = []
    for pair in pairs:
        test = pair["overall"]
        if test["paired"] == 0 and pair.get("scored"):  # only scored suites: scored_lines says it
            continue
        lines.append(
            f"{pair['b']} vs {pair['a']}: {test['miss_to_pass']} flipped miss→pass, {test['pass_to_miss']} "
            f"pass→miss of {test['paired']:,} paired cases, exact McNemar {format_p(test['p_value'])}"
        )
    return lines


def scored_lines(record: api.CompareRecord) -> list[str]:
    """Scored suites: one line per variant against the first and scope, the mean score difference and
    the Wilcoxon signed-rank test (the compare report's scored table)."""
    from recall_eval.api.gating import scored_comparisons
    from recall_eval.formatting import score_change_text

    return [
        f"{label} vs {record.labels[0]}, {scope}: {score_change_text(test)}"
        for label, scope, test in scored_comparisons(record.labels, record.runs)
    ]


def _search(variants: list[str], options: CompareOptions, hooks: object) -> None:
    """--lengths search:MIN..MAX: each variant's cliff (bracket and cost) on stderr, their directories on stdout."""
    from recall_eval.api.searching import find_cliffs

    try:
        records = find_cliffs(variants, options, hooks=hooks)  # type: ignore[arg-type]
    except api.RunInterrupted as stop:
        say("run the same compare again to go on from the stored batches", interrupted_word(), "yellow")
        raise typer.Exit(interrupted_exit_code()) from stop
    for record in records:
        for line in record.lines:
            say(line)
    for record in records:
        print(record.path)


@app.command()
@takes_options
def compare(
    variants: Annotated[
        list[str],
        typer.Argument(
            metavar="VARIANT...",
            help="Variants: profile overrides (fp8, bf16, fp4, topk=1024, fp8,topk=1024, mem=0.8, ctx=32768; "
            "fault=NAME plants a reference-engine bug, to test a gate), "
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
    Wilcoxon signed-rank), difference heatmaps, throughput. With --lengths search:MIN..MAX[:BUDGET], each
    variant's cliff instead (see `recall-eval sweep --help`).

    The same seed gives every variant the same cases. A finished run with the same cases and target is
    reused (--rerun runs it again), an interrupted one is resumed.

    Exit codes: 0 finished (and every gate met); 1 could not run or stopped early; 2 bad input;
    3 a variant got no answer from a live model; 4 below --fail-under or a --fail-on-regression drop;
    5 a variant's answers were all cut inside its reasoning (raise --max-tokens); 130 interrupted (143
    after SIGTERM)."""
    from recall_eval.cli.common import open_in_browser, resume_command
    from recall_eval.cli.display import ConsoleHooks
    from recall_eval.cliff import is_search

    if is_search(options.grid.lengths):
        _search(variants, options, ConsoleHooks(console, label_runs=True))
        return
    command = shlex.join(["recall-eval", "compare", *sys.argv[2:]]) if sys.argv[1:2] == ["compare"] else None
    try:
        record = api.compare(variants, options, hooks=ConsoleHooks(console, label_runs=True), command=command)
    except api.RunInterrupted as stop:
        say(
            f"in variant {stop.label}: rerun the same compare to resume (or {resume_command(stop.run_dir)})",
            interrupted_word(),
            "yellow",
        )
        raise typer.Exit(interrupted_exit_code()) from None
    except api.RunStopped as stop:
        if stop.gave_up:
            raise UserError(f"variant {stop.label!r}: {stop}; rerun the same compare to resume") from stop
        raise UserError(f"variant {stop.label!r}: {stop}", stop.exit_code) from stop
    say(f"compare directory: {record.path}")
    for line in paired_lines(record.pairs):
        say(line)
    for line in scored_lines(record):
        say(line)
    print(record.report)
    if open_report:
        open_in_browser(record.report)
    for line in record.verdict.lines:
        say(line, style="red")
    if record.verdict.exit_code:
        raise typer.Exit(record.verdict.exit_code)
