"""A gated run cut into the cells CI shows: one per suite x length, each with its recall (a scored
suite: its mean score), Wilson interval, the baseline's figure on the same cases, whether the cell is
part of why the gate failed, and its worst cases. JUnit XML (reports.junit), the step summary
(reports.step_summary) and metrics.json (reports.metrics_file) are written from these.

A cell fails only where the gate failed: its suite (or the pooled/overall scope) failed the baseline
test and the cell lost cases against the baseline, or its suite (or overall) is below --fail-under and
so is the cell. So a run that exits 0 has no failed cell, and every failed cell points at the drop.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pandas as pd

from recall_eval.baseline_gate import POOLED, ScopeTest
from recall_eval.exit_codes import RecallGate
from recall_eval.stats import matched, recall_table, score_table, wilson_interval
from recall_eval.types import INFRA_OUTCOMES

WORST = 5  # cases listed in a failed cell
ANSWER_CHARS = 60


@dataclass(frozen=True)
class Cell:
    suite: str
    length: int
    kind: str  # recall or score
    cases: int
    answered: int
    passes: int  # pass/miss suites
    value: float | None  # recall, or mean score
    ci_low: float | None
    ci_high: float | None
    infra: int
    baseline: float | None  # the baseline's figure on the same (paired) cases
    failure: str | None  # why the cell fails, None when it does not
    worst: tuple[str, ...]  # the worst cases, one line each

    @property
    def name(self) -> str:
        return f"{self.suite} @ {self.length} tokens"

    def figure(self) -> str:
        if self.value is None:
            return "no answer from a live model"
        if self.kind == "score":
            return f"mean score {self.value:.3f} ({self.answered} answered)"
        return (
            f"recall {self.value:.3f} ({self.passes}/{self.answered}) [{self.ci_low:.3f}, {self.ci_high:.3f}]"
        )


def _case_line(row: pd.Series, baseline_outcome: str | None) -> str:
    answer = str(row.get("answer") or "").replace("\n", " ")
    answer = answer[:ANSWER_CHARS] + ("..." if len(answer) > ANSWER_CHARS else "")
    was = f" (baseline: {baseline_outcome})" if baseline_outcome else ""
    why = f", {row['error']}" if isinstance(row.get("error"), str) and row["error"] else ""
    return (
        f"{row['case_id']} depth {row['depth_percent']:g}% trial {int(row['trial'])}: {row['outcome']}{was}{why}, "
        f"answer {answer!r}"
    )


def _worst(cell: pd.DataFrame, base: pd.DataFrame | None) -> tuple[str, ...]:
    """The cell's misses (baseline passes lost first), then its infrastructure outcomes."""
    bad = cell[~cell["passed"] | cell["outcome"].isin(INFRA_OUTCOMES)]
    if "score" in bad and bad["metric"].notna().any():
        bad = cell.sort_values("score", na_position="first")
        bad = bad[bad["score"].fillna(0) < 1]
    was: dict[str, str] = {}
    if base is not None and len(base):
        was = dict(zip(base["case_id"], base["outcome"], strict=True))
        lost = bad["case_id"].map(lambda c: was.get(c) == "pass")
        bad = pd.concat([bad[lost], bad[~lost]])
    return tuple(_case_line(row, was.get(row["case_id"])) for _, row in bad.head(WORST).iterrows())


def _failing_suites(tests: Sequence[ScopeTest]) -> set[str]:
    failed = {test.scope for test in tests if test.worse}
    if POOLED in failed:
        failed |= {test.scope for test in tests if test.kind == "recall"}
    return failed


def gate_cells(
    frame: pd.DataFrame,
    gate: RecallGate | None = None,
    tests: Sequence[ScopeTest] = (),
    baseline: pd.DataFrame | None = None,
    failing: set[str] | None = None,
) -> list[Cell]:
    """The cells of a run's headline frame, in suite then length order (see the module docstring).
    `failing`: the suites significantly worse than `baseline` when the caller tested them (a compare's
    --fail-on-regression), instead of `tests`."""
    failing = _failing_suites(tests) if failing is None else failing
    scored = frame["metric"].notna()
    overall = recall_table(frame[~scored]).iloc[0] if (~scored).any() else None
    cells = []
    for (suite, length), cell in frame.groupby(["suite", "target_tokens"], sort=True):
        is_scored = bool(cell["metric"].notna().any())
        base = baseline[baseline["case_id"].isin(cell["case_id"])] if baseline is not None else None
        paired = matched(base, cell) if base is not None else None
        live = paired[paired["counted_a"] & paired["counted_b"]] if paired is not None else None
        if is_scored:
            row = score_table(cell).iloc[0]
            value = None if pd.isna(row["score"]) else float(row["score"])
            answered, passes, bounds = int(row["answered"]), 0, None
            base_value = float(live["score_a"].mean()) if live is not None and len(live) else None
            cand_paired = float(live["score_b"].mean()) if live is not None and len(live) else None
        else:
            row = recall_table(cell).iloc[0]
            value = None if pd.isna(row["recall"]) else float(row["recall"])
            answered, passes = int(row["answered"]), int(row["passes"])
            bounds = wilson_interval(passes, answered)
            base_value = float(live["passed_a"].mean()) if live is not None and len(live) else None
            cand_paired = float(live["passed_b"].mean()) if live is not None and len(live) else None
        failure = None
        if (
            suite in failing
            and base_value is not None
            and cand_paired is not None
            and cand_paired < base_value
        ):
            failure = (
                f"{suite} is significantly worse than the baseline; in this cell "
                f"{base_value:.3f} -> {cand_paired:.3f} on {len(live)} paired cases"  # type: ignore[arg-type]
            )
        threshold = gate.per_suite.get(suite) if gate is not None else None
        suite_value = (
            recall_table(frame[frame["suite"] == suite]).iloc[0]["recall"] if not is_scored else None
        )
        if threshold is not None and not is_scored and value is not None and suite_value < threshold > value:
            failure = (
                failure
                or f"{suite} recall {suite_value:.3f} is below --fail-under {threshold:g}, and so is this cell"
            )
        if (
            gate is not None
            and gate.overall is not None
            and overall is not None
            and not is_scored
            and value is not None
            and overall["recall"] < gate.overall > value
        ):
            failure = (
                failure
                or f"overall recall {overall['recall']:.3f} is below --fail-under {gate.overall:g}, and so is this cell"
            )
        cells.append(
            Cell(
                suite=str(suite),
                length=int(length),
                kind="score" if is_scored else "recall",
                cases=len(cell),
                answered=answered,
                passes=passes,
                value=value,
                ci_low=bounds[0] if bounds else None,
                ci_high=bounds[1] if bounds else None,
                infra=int(cell["outcome"].isin(INFRA_OUTCOMES).sum()),
                baseline=base_value,
                failure=failure,
                worst=_worst(cell, base) if failure else (),
            )
        )
    return cells
