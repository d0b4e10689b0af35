"""`recall-eval report RUN_DIR [--open]`: re-render a run's report from its directory."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from recall_eval.cli.app import app, console
from recall_eval.cli.common import open_in_browser, render_report, summary_line
from recall_eval.store import RunStore
from reports.compare_report import render_compare

COMPARE_MANIFEST = "compare.json"


@app.command()
def report(
    run_dir: Annotated[
        Path,
        typer.Argument(help="A run directory (runs/<run-id>) or a compare directory (runs/compare-...)."),
    ],
    open_report: Annotated[bool, typer.Option("--open", help="Open the report in the browser.")] = False,
) -> None:
    """Render RUN_DIR/report.html (or a compare directory's compare.html) again; prints its path."""
    if (run_dir / COMPARE_MANIFEST).is_file():
        path = render_compare(run_dir)
        print(path)
        if open_report:
            open_in_browser(path)
        return
    store = RunStore.open(run_dir)  # a missing or foreign directory is a one-line error
    path = render_report(store.path)
    print(path)
    console.print(summary_line(store.results()), highlight=False)
    if open_report:
        open_in_browser(path)
