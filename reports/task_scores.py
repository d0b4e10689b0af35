"""Scored suites in RULER's layout: a task x length table of mean scores, and per-task effective lengths.

RULER reports each task's score at each length as 100 x the mean per-sample score, and a model's
effective length as the longest length whose score stays at or above 85.6 (Llama-2-7B's mean at 4K);
this project's own threshold (recall_eval.stats.EFFECTIVE_RECALL) is shown beside it. MRCR-style
tasks carry their random-guess floor (the mean of param_floor), shown beside their score, and every
task the answer budget (max_tokens) its cases were sent with (RULER's differs by task). Every figure
comes from recall_eval.stats.score_table over the results frame; pass/miss suites are not in here.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from recall_eval.stats import EFFECTIVE_RECALL, effective_length, score_table

RULER_THRESHOLD = 0.856  # RULER's effective-length threshold: Llama-2-7B's mean score at 4K, 85.6 of 100


@dataclass(frozen=True)
class TaskRow:
    task: str
    metric: str
    scores: dict[int, float | None]  # length -> mean score in [0, 1] (None: nothing answered there)
    mean: float | None  # over every answered case of the task
    answered: int
    ruler_effective_length: int | None  # longest length holding >= RULER_THRESHOLD (and all shorter)
    effective_length: int | None  # the same at this project's EFFECTIVE_RECALL
    floor: float | None  # random-guess floor (MRCR-style tasks), else None
    max_tokens: tuple[int, ...] = ()  # the answer budgets its cases were sent with (one, unless mixed)


@dataclass(frozen=True)
class TaskTable:
    lengths: tuple[int, ...]
    rows: tuple[TaskRow, ...]
    ruler_threshold: float = RULER_THRESHOLD
    threshold: float = EFFECTIVE_RECALL

    def averages(self) -> dict[int, float | None]:
        """Per length, the mean of the tasks' scores (RULER's 'Avg.' column is this over its tasks)."""
        out = {}
        for length in self.lengths:
            values = [row.scores[length] for row in self.rows if row.scores.get(length) is not None]
            out[length] = sum(values) / len(values) if values else None
        return out


def _value(value: object) -> float | None:
    return None if value is None or pd.isna(value) else float(value)  # type: ignore[arg-type]


def task_table(frame: pd.DataFrame, planned: tuple[str, ...] = ()) -> TaskTable | None:
    """The table of the frame's scored tasks (rows with a metric), or None when there are none; tasks
    in the planned suites' order (RULER's order for `--suite ruler`), then any others."""
    scored = frame[frame["metric"].notna()] if "metric" in frame else frame.iloc[0:0]
    if scored.empty:
        return None
    lengths = tuple(sorted({int(n) for n in scored["target_tokens"]}))
    rows = []
    for task in dict.fromkeys([*(name for name in planned if name in set(scored["task"])), *scored["task"]]):
        mine = scored[scored["task"] == task]
        by_length = score_table(mine, ["target_tokens"])["score"]
        scores = {
            length: _value(by_length.get(length))
            for length in lengths
            if length in set(mine["target_tokens"])
        }
        series = pd.Series({n: v for n, v in scores.items()}, dtype=float)
        whole = score_table(mine)
        floors = mine["param_floor"].dropna() if "param_floor" in mine else pd.Series(dtype=float)
        rows.append(
            TaskRow(
                task=str(task),
                metric=str(mine["metric"].iloc[0]),
                scores=scores,
                mean=_value(whole["score"].iloc[0]),
                answered=int(whole["answered"].iloc[0]),
                ruler_effective_length=effective_length(series, RULER_THRESHOLD),
                effective_length=effective_length(series, EFFECTIVE_RECALL),
                floor=float(floors.mean()) if len(floors) else None,
                max_tokens=tuple(sorted({int(n) for n in mine["max_tokens"].dropna()})),
            )
        )
    return TaskTable(lengths=lengths, rows=tuple(rows))


@dataclass(frozen=True)
class ScoreSummary:
    """A run's scored suites in one row, beside the pass/miss suites' pooled recall: the mean score over
    their answered cases (stats.score_table, as the console line and --fail-under state it), and per
    length the mean of the tasks' scores (RULER's 'Avg.') with the effective length at RULER's threshold
    over it (None when even the shortest length falls below)."""

    score: float | None
    answered: int
    by_length: dict[int, float | None]
    ruler_effective_length: int | None
    ruler_threshold: float = RULER_THRESHOLD


def score_summary(frame: pd.DataFrame, planned: tuple[str, ...] = ()) -> ScoreSummary | None:
    """The frame's scored suites summed up (ScoreSummary); None when it has none."""
    table = task_table(frame, planned)
    if table is None:
        return None
    whole = score_table(frame[frame["metric"].notna()]).iloc[0]
    by_length = table.averages()
    return ScoreSummary(
        score=_value(whole["score"]),
        answered=int(whole["answered"]),
        by_length=by_length,
        ruler_effective_length=effective_length(pd.Series(by_length, dtype=float), RULER_THRESHOLD),
    )
