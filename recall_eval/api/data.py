"""Results as data from the library: the results table of runs already loaded or still on disk."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import pandas as pd

from recall_eval import frame
from recall_eval.api.records import CompareRecord, RunRecord
from recall_eval.frame import ExportFormat
from recall_eval.store import RunStore

RunLike = str | Path | RunRecord | CompareRecord


def _records(runs: RunLike | Iterable[RunLike]) -> list[RunRecord | Path]:
    items = [runs] if isinstance(runs, str | Path | RunRecord | CompareRecord) else list(runs)
    out: list[RunRecord | Path] = []
    for item in items:
        if isinstance(item, CompareRecord):
            out.extend(item.runs)
        elif isinstance(item, RunRecord):
            out.append(item)
        else:
            out.extend(frame.run_dirs(item))  # a compare directory stands for its runs
    return out


def results_frame(runs: RunLike | Iterable[RunLike]) -> pd.DataFrame:
    """One row per case of the given runs: RunRecords (what sweep/compare/load_run return), a
    CompareRecord (its runs), or run / compare directories. Columns: README, "Results as data"."""
    pairs = []
    for item in _records(runs):
        if isinstance(item, RunRecord):
            pairs.append((item.run, list(item.results)))
        else:
            record = RunRecord.from_store(RunStore.open(item))
            pairs.append((record.run, list(record.results)))
    return frame.frame_of(pairs)


def runs_frame(runs: RunLike | Iterable[RunLike]) -> pd.DataFrame:
    """One row per run (README, "Results as data")."""
    paths = [item.path if isinstance(item, RunRecord) else item for item in _records(runs)]
    return frame.runs_frame(paths)


def export(
    runs: RunLike | Iterable[RunLike], fmt: ExportFormat = "csv", out: Path | str | None = None
) -> bytes | None:
    """Write results_frame(runs) as csv, parquet or jsonl to `out`; the bytes when `out` is None."""
    return frame.export_frame(results_frame(runs), fmt, Path(out) if out is not None else None)
