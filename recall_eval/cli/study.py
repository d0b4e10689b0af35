"""`recall-eval study --axis KNOB=V1,V2 [--axis ...]`: parse, call recall_eval.api.study, print the cells'
table, the recommendation and the study page's path (the last line); exit codes for CI.

The axes' grammar lives in recall_eval.study_axes; the plan, reuse and resume in recall_eval.api.studying;
the statistics in recall_eval.study_stats.
"""

from __future__ import annotations

import shlex
import sys
from typing import TYPE_CHECKING, Annotated

import typer

from recall_eval import api
from recall_eval.api.options import StudyOptions
from recall_eval.cli.app import app, console, interrupted_exit_code, interrupted_word, say
from recall_eval.cli.options import takes_options

if TYPE_CHECKING:
    from recall_eval.api.records import StudyRecord


def cells_table(record: StudyRecord) -> list[str]:
    """The console's table of cells: plan, status, recall, effective length, raw and Holm p, speed, memory."""
    from rich.console import Console
    from rich.table import Table

    from recall_eval.formatting import format_p, percent, rate, seconds, tokens

    study = record.study
    rows = {row["cell"]: row for row in study["numbers"]["cells"]}
    table = Table(title=f"study {study['study_id']} (baseline {record.baseline})")
    for header in (
        "cell",
        "plan",
        "status",
        "recall",
        "cliff" if study.get("search") else "eff. length",
        "p raw",
        "p Holm",
        "TTFT p50",
        "decode tok/s",
        "KV B/token",
    ):
        table.add_column(header, justify="left" if header in ("cell", "plan", "status") else "right")
    for cell in study["cells"]:
        row = rows.get(cell["label"])
        fits = cell["plan"]["fits"]
        plan = "not planned" if fits is None else ("fits" if fits else "does not fit")
        numbers = ["–"] * 7
        if row is not None:
            numbers = [
                f"{percent(row['recall'])} ({row['passes']}/{row['answered']})",
                _length_text(row, bool(study.get("search"))),
                format_p(row["p_value"]) if row["p_value"] is not None else "–",
                (format_p(row["p_holm"]) + (" worse" if row["worse"] else ""))
                if row["p_holm"] is not None
                else "–",
                seconds(row["ttft_s"]),
                rate(row["decode_tps"]),
                tokens(row["kv_bytes_per_token"]) if row["kv_bytes_per_token"] is not None else "–",
            ]
        status = cell["status"].replace("_", " ") + (" (reused)" if cell["reused"] else "")
        table.add_row(cell["label"], plan, status, *numbers)
    out = (
        console if console.is_terminal else Console(width=200, highlight=False)
    )  # piped: keep the table whole
    with out.capture() as captured:
        out.print(table)
    return captured.get().splitlines()


def _length_text(row: dict, searched: bool) -> str:
    """The effective length, or for a searched cliff its bracket (last length held - first that fell)."""
    from recall_eval.formatting import tokens

    if searched:
        held, fell = row.get("cliff_held"), row.get("cliff_fell")
        return (
            f"{tokens(held) if held is not None else 'below'}–{tokens(fell) if fell is not None else 'above'}"
        )
    return tokens(row["effective_length"]) if row["effective_length"] is not None else "none"


@app.command()
@takes_options
def study(
    axis: Annotated[
        list[str],
        typer.Option(
            "--axis",
            metavar="KNOB=V1,V2",
            help="An axis of the study: a variant knob and its values (dtype=fp8,bf16; topk=512,2048; mem=0.8,0.9; "
            "ctx=..., tp=..., page=..., effort=..., think=on,off; profile=NAME1,NAME2). Repeat for more axes: the "
            "study runs their cross product.",
            show_default=False,
        ),
    ],
    options: StudyOptions,
) -> None:
    """Run every cell of the axes' cross product on identical cases and say which setting keeps recall, at what
    cost: exact McNemar per cell against the baseline (pooled, per suite, per length), Holm-corrected over
    the cells; recall per length with Wilson intervals; speed and memory per cell; a recommendation.

    Each cell is planned first (KV slots, sequences of the longest request at once, fit or not); a cell
    that does not fit is listed and not launched (--force launches it). Servers run one after another; with --ray all cells
    start at once on the cluster and Ray decides which servers run together (as compare --ray).
    Running the same study again reuses finished cells and resumes an interrupted one.

    Exit codes: 0 finished; 1 could not run; 2 bad input; 4 a cell's recall significantly below the
    baseline's after Holm correction, or a cell below --fail-under (the code of every failed gate); 130 interrupted (143 after SIGTERM)."""
    from recall_eval.cli.display import ConsoleHooks

    command = shlex.join(["recall-eval", "study", *sys.argv[2:]]) if sys.argv[1:2] == ["study"] else None
    try:
        record = api.study(axis, options, hooks=ConsoleHooks(console, label_runs=True), command=command)
    except api.RunInterrupted as stop:
        say(f"in cell {stop.label}: rerun the same study to resume it", interrupted_word(), "yellow")
        raise typer.Exit(interrupted_exit_code()) from None
    say(f"study directory: {record.path}")
    for line in cells_table(record):
        print(line, file=sys.stderr)
    say(record.recommendation)
    print(record.report)
    for line in record.verdict.lines:
        say(line, style="red")
    if record.verdict.exit_code:
        raise typer.Exit(record.verdict.exit_code)
