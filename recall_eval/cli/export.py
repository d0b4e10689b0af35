"""`recall-eval export RUN... --format csv|parquet|jsonl [--out FILE]`: the results table of runs as a file."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from recall_eval import api
from recall_eval.cli.app import app, console
from recall_eval.errors import BadInput

# recall_eval.frame.EXPORT_FORMATS, written out so that --help does not import pandas (a test compares them)
FORMATS_HELP = "csv, parquet, jsonl"


@app.command()
def export(
    runs: Annotated[
        list[Path],
        typer.Argument(
            metavar="RUN...",
            help="Run directories (runs/<run-id>), or run ids as `recall-eval runs` prints them; a compare "
            "directory stands for its runs.",
        ),
    ],
    fmt: Annotated[
        str | None, typer.Option("--format", "-f", help=f"One of {FORMATS_HELP}. (default: csv)")
    ] = None,
    out: Annotated[
        Path | None,
        typer.Option("--out", "-o", help="File to write. (default: standard output; parquet needs --out)"),
    ] = None,
) -> None:
    """Write the results of RUNS as one table, one row per case (the columns are listed in README,
    "Results as data"). Several runs are concatenated; the run_id column tells them apart."""
    from recall_eval.frame import EXPORT_FORMATS, check_export_path, export_frame

    fmt = fmt or "csv"
    if fmt not in EXPORT_FORMATS:
        raise BadInput(f"--format {fmt!r}: pick one of {', '.join(EXPORT_FORMATS)}")
    if fmt == "parquet" and out is None:
        raise BadInput("--format parquet is binary: give a file with --out results.parquet")
    if out is not None:
        check_export_path(out, fmt)  # before the runs are read
    frame = api.results_frame(runs)
    data = export_frame(frame, fmt, out)  # type: ignore[arg-type]
    if out is None:
        sys.stdout.buffer.write(data or b"")
        sys.stdout.flush()
        return
    runs = frame["run_id"].nunique()
    plural = "s" if runs != 1 else ""
    console.print(f"{len(frame):,} cases from {runs} run{plural} → {out}", highlight=False, markup=False)
