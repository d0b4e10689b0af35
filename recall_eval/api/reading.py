"""Reading stored runs: one run directory, or every run under the runs home."""

from __future__ import annotations

from pathlib import Path

from recall_eval.api.records import RunRecord
from recall_eval.store import RunStore, list_runs, runs_home


def load_run(path: Path | str) -> RunRecord:
    """The run in `path` (a runs/<run-id> directory): run.json, its results, its report if rendered.

    Raises UserError when `path` is not a run directory or run.json does not parse.
    """
    return RunRecord.from_store(RunStore.open(Path(path)))


def runs(home: Path | str | None = None) -> list[RunRecord]:
    """Every run under `home` (default: $RECALL_EVAL_HOME, else ./runs), oldest first."""
    root = Path(home) if home is not None else runs_home()
    return [RunRecord.from_store(store) for store in list_runs(root)]
