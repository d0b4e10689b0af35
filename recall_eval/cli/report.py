"""`recall-eval report RUN_DIR [--open]`: re-render a run's (or a compare's) report from its directory."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from recall_eval import api
from recall_eval.api.options import SweepOptions
from recall_eval.cli.app import app, console
from recall_eval.cli.options import OpenReport, only, takes_options


@app.command()
@takes_options
def report(
    run_dir: Annotated[
        Path,
        typer.Argument(
            metavar="RUN_DIR",
            help="A run directory (runs/<run-id>) or a compare directory (runs/compare-...), or its id as "
            "`recall-eval runs` prints it.",
        ),
    ],
    headline: Annotated[SweepOptions, only("scoring")],
    open_report: OpenReport = False,
) -> None:
    """Render RUN_DIR/report.html (or a compare directory's compare.html) again; prints its path.
    --scoring picks the headline verdict (default: what the run or compare chose)."""
    scoring = headline.scoring
    from recall_eval.api.records import REPORT_FILE
    from recall_eval.cli.common import open_in_browser, summary_line

    path = api.render_report(run_dir, scoring)
    print(path)
    if path.name == REPORT_FILE:  # a run, not a compare
        record = api.load_run(run_dir)
        line = summary_line(list(record.results), scoring or record.run.scoring)
        console.print(line, markup=False, highlight=False)
    if open_report:
        open_in_browser(path)
