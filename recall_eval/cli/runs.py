"""`recall-eval runs`: the runs under runs_home() as a table."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from recall_eval.cli.app import app
from recall_eval.frame import frame_of
from recall_eval.stats import recall_table
from recall_eval.store import RunStore, list_runs, runs_home


def _lengths_text(lengths: tuple[int, ...]) -> str:
    if len(lengths) <= 3:
        return ",".join(str(length) for length in lengths)
    return f"{lengths[0]}..{lengths[-1]} ({len(lengths)})"


def _row(store: RunStore) -> list[str]:
    run = store.run
    spec = run.spec
    results = store.results()
    total = len(spec.suites) * len(spec.lengths) * len(spec.depths) * spec.trials
    done = len({result.case_id for result in results})
    overall = recall_table(frame_of([(run, results)])).iloc[0]
    passes, answered = int(overall["passes"]), int(overall["answered"])
    recall = f"{100 * overall['recall']:.1f}% ({passes}/{answered})" if answered else "-"
    created = time.strftime("%Y-%m-%d %H:%M", time.localtime(run.created_at))
    return [
        run.run_id,
        run.status,
        ",".join(spec.suites),
        _lengths_text(spec.lengths),
        f"{done}/{total}",
        recall,
        created,
    ]


@app.command()
def runs(
    home: Annotated[
        Path | None, typer.Option("--home", help="Where runs live. (default: $RECALL_EVAL_HOME or ./runs)")
    ] = None,
) -> None:
    """List runs: id, status, suites, lengths, cases done/total, recall, created."""
    root = home if home is not None else runs_home()
    stores = list_runs(root)
    out = Console()
    if not out.is_terminal:  # piped: do not squeeze the table into 80 columns
        out = Console(width=200)
    if not stores:
        out.print(f"no runs in {root}", highlight=False)
        return
    table = Table(title=f"runs in {root}")
    for column in ("id", "status", "suites", "lengths", "cases", "recall", "created"):
        table.add_column(column, no_wrap=column in ("id", "created"))
    for store in stores:
        table.add_row(*_row(store))
    out.print(table)
