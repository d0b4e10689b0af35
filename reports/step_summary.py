"""The GitHub Actions step summary of a gated run: markdown appended to $GITHUB_STEP_SUMMARY (or
--step-summary FILE): a headline with the verdict, one table row per suite (recall with its interval,
and against a baseline: its recall on the same cases, the drop with its interval, the Holm-adjusted
p), the failed cells, and the verdict's lines. Numbers and names only: no model output goes into it."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from recall_eval.baseline_gate import ScopeTest
from recall_eval.stats import recall_table, score_table
from recall_eval.types import Run
from reports.gate_cells import Cell


def _pct(value: float | None) -> str:
    return "–" if value is None or pd.isna(value) else f"{100 * value:.1f}%"


def _suite_rows(frame: pd.DataFrame, tests: Sequence[ScopeTest]) -> list[str]:
    by_scope = {test.scope: test for test in tests}
    rows = []
    for suite in dict.fromkeys(frame["suite"]):
        part = frame[frame["suite"] == suite]
        if part["metric"].notna().any():
            score = score_table(part).iloc[0]
            figure = f"score {score['score']:.3f}" if not pd.isna(score["score"]) else "–"
        else:
            row = recall_table(part).iloc[0]
            figure = f"{_pct(row['recall'])} [{_pct(row['ci_low'])}, {_pct(row['ci_high'])}]"
        rows.append(_row(str(suite), len(part), figure, by_scope.get(str(suite))))
    for test in tests:
        if test.scope not in set(frame["suite"]):
            rows.append(_row(test.scope, test.paired, f"{_pct(test.candidate)} (paired)", test))
    return rows


def _row(name: str, cases: int, figure: str, test: ScopeTest | None) -> str:
    if test is None:
        return f"| {name} | {cases} | {figure} | | | | |"
    drop = (
        f"{_pct(test.drop)} [{_pct(test.drop_low)}, {_pct(test.drop_high)}]" if test.drop is not None else "–"
    )
    verdict = "❌ worse" if test.worse else "✅"
    return f"| {name} | {cases} | {figure} | {_pct(test.baseline)} | {drop} | {test.p_adjusted:.2g} | {verdict} |"


def step_summary(
    run: Run,
    frame: pd.DataFrame,
    cells: Sequence[Cell],
    tests: Sequence[ScopeTest],
    exit_code: int,
    lines: Sequence[str],
    baseline_name: str | None = None,
    commit: str | None = None,
) -> str:
    """The markdown of one gated run (see the module docstring)."""
    passed = exit_code == 0
    against = f" against baseline `{baseline_name}`" if baseline_name else ""
    at = f" at `{commit}`" if commit else ""
    head = [
        f"## {'✅' if passed else '❌'} recall-eval gate {'passed' if passed else f'failed (exit {exit_code})'}",
        "",
        f"Run `{run.run_id}` ({run.spec.variant}){at}{against}: {len(frame)} cases, scoring {run.scoring}.",
        "",
        "| suite | cases | recall [95% CI] | baseline | drop [95% CI] | p (Holm) | |",
        "|---|---:|---|---:|---|---:|---|",
        *_suite_rows(frame, tests),
        "",
    ]
    failed = [cell for cell in cells if cell.failure is not None]
    if failed:
        head += ["Failed cells:", ""] + [f"- {cell.name}: {cell.figure()}: {cell.failure}" for cell in failed]
        head.append("")
    if lines:
        head += ["Verdict:", ""] + [f"- {line}" for line in lines] + [""]
    return "\n".join(head) + "\n"


def append_step_summary(path: Path, text: str) -> None:
    """Append, as GitHub Actions expects of $GITHUB_STEP_SUMMARY (other steps write to it too)."""
    with open(path, "a", encoding="utf-8") as handle:
        handle.write(text)
