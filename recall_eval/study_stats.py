"""The statistics of a study: its cells as one family of comparisons against the baseline cell.

For every cell that ran, on its cases shared with the baseline (same case ids); a scored suite's case
(RULER's tasks, mrcr) counts as passed when it scores full marks, the outcome recall_eval.metrics gives it:
- exact McNemar (recall_eval.stats.paired_test), pooled over the suites, per suite, and per length;
  each of the three is one family over all cells (pooled: one test per cell; per suite: cells x suites;
  per length: cells x lengths), Holm-corrected (recall_eval.stats.holm_adjust); raw and adjusted p kept;
- recall per length with its 95% Wilson interval, effective length, misses by length x depth;
- speed: median TTFT and median decode tok/s over answered cases, each with a bootstrap interval;
  memory: KV bytes per token (the server's own figure, else the plan's), exact.

A cell is *significantly worse* when its pooled Holm-adjusted p is below SIGNIFICANCE and it lost more
cases than it gained. The recommendation: among the cells not significantly below the baseline at any
tested length (per-length Holm-adjusted p, lost > gained), those whose recall holds (>= the effective-
length threshold) at every tested length; the cheapest of them by the chosen cost (memory: fewest KV
bytes per token; decode: highest median decode tok/s; ttft: lowest median TTFT), stated against the
baseline. When none holds at every length: "no cell restores recall at lengths >= L", L the first length
where every such cell fell.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from recall_eval.stats import (
    EFFECTIVE_RECALL,
    SIGNIFICANCE,
    effective_length_of,
    holm_adjust,
    median_ci,
    paired_test,
    paired_tests_by,
    percentile,
    recall_table,
)

CORRECTION = "Holm (step-down Bonferroni), one family per scope: pooled over cells, per suite over cells x suites, per length over cells x lengths"


@dataclass(frozen=True)
class CellData:
    """A cell that ran: its label and results frame (one headline row per case)."""

    label: str
    frame: pd.DataFrame
    kv_bytes_per_token: float | None  # the server's (else the plan's); None when unknown


@dataclass(frozen=True)
class StudyNumbers:
    cells: pd.DataFrame  # one row per cell: recall, interval, effective length, speed, memory, verdicts
    tests: pd.DataFrame  # one row per cell x scope (pooled, suite:<name>, length:<n>): McNemar raw + Holm
    lengths: pd.DataFrame  # one row per cell x length: recall with its Wilson interval
    misses: pd.DataFrame  # one row per cell x length x depth: misses and answered
    recommendation: dict[str, Any]  # the stated answer (see module docstring)


def _as_verdicts(frame: pd.DataFrame) -> pd.DataFrame:
    """Every case as a pass/miss verdict: a scored suite's case by its outcome (a pass only at full
    marks), so that the McNemar tests take it as they take a needle (paired_test alone leaves scored
    suites to the Wilcoxon test of a compare; a study ranks every cell on recall)."""
    return frame.assign(metric=None) if "metric" in frame else frame


def _interval(values: pd.Series) -> tuple[float | None, float | None, float | None]:
    median = percentile(values, 50)
    bounds = median_ci(values)
    return median, bounds[0] if bounds else None, bounds[1] if bounds else None


def _cell_row(cell: CellData, baseline: str) -> dict[str, Any]:
    frame = cell.frame
    total = recall_table(frame).iloc[0]
    answered = frame[frame["counted"]]
    ttft, ttft_low, ttft_high = _interval(answered["ttft_s"])
    decode, decode_low, decode_high = _interval(answered["decode_tps"])
    return {
        "cell": cell.label,
        "baseline": cell.label == baseline,
        "cases": int(total["cases"]),
        "answered": int(total["answered"]),
        "passes": int(total["passes"]),
        "infra": int(total["infra"]),
        "recall": None if pd.isna(total["recall"]) else float(total["recall"]),
        "recall_low": None if pd.isna(total["ci_low"]) else float(total["ci_low"]),
        "recall_high": None if pd.isna(total["ci_high"]) else float(total["ci_high"]),
        "effective_length": effective_length_of(frame),
        "ttft_s": ttft,
        "ttft_low": ttft_low,
        "ttft_high": ttft_high,
        "decode_tps": decode,
        "decode_low": decode_low,
        "decode_high": decode_high,
        "kv_bytes_per_token": cell.kv_bytes_per_token,
    }


def _test_rows(base: pd.DataFrame, cell: CellData) -> list[dict[str, Any]]:
    frame = _as_verdicts(cell.frame)
    lengths = sorted(set(base["target_tokens"].dropna().astype(int)))  # the baseline's lengths
    scopes = {
        "pooled": paired_test(base, frame),
        **{
            f"suite:{suite}": test
            for suite, test in paired_tests_by(base, frame, "suite", test=paired_test).items()
        },
        **{
            f"length:{length}": test
            for length, test in paired_tests_by(base, frame, "target_tokens", lengths, paired_test).items()
        },
    }
    rows = []
    for scope, test in scopes.items():
        rows.append(
            {
                "cell": cell.label,
                "scope": scope,
                "family": scope.split(":")[0],
                "paired": test.paired,
                "lost": test.lost,
                "gained": test.gained,
                "excluded_infra": test.excluded_infra,
                "unpaired": test.unpaired,
                "p_value": test.p_value,
            }
        )
    return rows


def _tests(base: CellData, others: Sequence[CellData]) -> pd.DataFrame:
    base_frame = _as_verdicts(base.frame)
    rows = [row for cell in others for row in _test_rows(base_frame, cell)]
    columns = ["cell", "scope", "family", "paired", "lost", "gained", "excluded_infra", "unpaired", "p_value"]
    tests = pd.DataFrame(rows, columns=columns)
    tests["p_holm"] = np.nan
    for _, family in tests.groupby("family"):
        tests.loc[family.index, "p_holm"] = holm_adjust(family["p_value"].tolist())
    tests["worse"] = (tests["p_holm"] < SIGNIFICANCE) & (tests["lost"] > tests["gained"])
    return tests


def _lengths(cells: Sequence[CellData]) -> pd.DataFrame:
    parts = []
    for cell in cells:
        table = recall_table(cell.frame, ["target_tokens"]).reset_index()
        table.insert(0, "cell", cell.label)
        parts.append(table.rename(columns={"target_tokens": "length"}))
    return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame()


def _misses(cells: Sequence[CellData]) -> pd.DataFrame:
    parts = []
    for cell in cells:
        frame = cell.frame
        answered = frame[frame["counted"]].assign(missed=lambda f: (~f["passed"]).astype(int), one=1)
        table = (
            answered.groupby(["target_tokens", "depth_percent"], dropna=False)[["missed", "one"]]
            .sum()
            .reset_index()
            .rename(
                columns={
                    "target_tokens": "length",
                    "depth_percent": "depth",
                    "missed": "misses",
                    "one": "answered",
                }
            )
        )
        table.insert(0, "cell", cell.label)
        parts.append(table)
    return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame()


_COST_COLUMN = {
    "memory": ("kv_bytes_per_token", False),
    "decode": ("decode_tps", True),
    "ttft": ("ttft_s", False),
}
_COST_WORDS = {"memory": "KV bytes/token", "decode": "decode tok/s", "ttft": "TTFT"}


def _shown(value: float, cost: str) -> str:
    """A cost as the recommendation states it: bytes whole, tok/s to a tenth, TTFT in ms."""
    return (
        f"{value:,.0f}"
        if cost == "memory"
        else (f"{value:.1f}" if cost == "decode" else f"{value * 1000:.0f} ms")
    )


def _change(value: float, base: float) -> str:
    return "same as the baseline" if value == base else f"{(value / base - 1):+.1%} vs the baseline"


def recommend(
    cells: pd.DataFrame, tests: pd.DataFrame, lengths: pd.DataFrame, baseline: str, cost: str
) -> dict[str, Any]:
    """The recommendation of the module docstring, as a dict: line (the sentence), cell (or None), cost
    figures, the cells eligible (never significantly below the baseline at a tested length) and holding."""
    column, higher_better = _COST_COLUMN[cost]
    below = set(tests.loc[(tests["family"] == "length") & tests["worse"], "cell"])
    ran = cells[cells["answered"] > 0]
    eligible = [c for c in ran["cell"] if c not in below]
    tested = sorted(lengths["length"].dropna().astype(int).unique())
    holds = {c: bool((lengths[(lengths["cell"] == c)]["recall"] >= EFFECTIVE_RECALL).all()) for c in eligible}
    holding = [c for c in eligible if holds[c]]
    costed = ran.set_index("cell")
    result: dict[str, Any] = {
        "cost": cost,
        "eligible": eligible,
        "holding": holding,
        "threshold": EFFECTIVE_RECALL,
        "alpha": SIGNIFICANCE,
        "cell": None,
        "line": "",
    }
    candidates = [c for c in holding if pd.notna(costed.at[c, column])]
    if not candidates:
        fell = []
        for cell in eligible:
            rows = lengths[(lengths["cell"] == cell) & ~(lengths["recall"] >= EFFECTIVE_RECALL)]
            if not rows.empty:
                fell.append(int(rows["length"].min()))
        first = max(fell) if fell else (tested[0] if tested else None)
        result["first_failing_length"] = first
        where = f"{first:,}" if first is not None else "any tested length"
        result["line"] = (
            f"no cell restores recall at lengths >= {where} (recall >= {EFFECTIVE_RECALL:g} at every tested "
            f"length without a significant loss against {baseline})"
        )
        return result
    pick = sorted(candidates, key=lambda c: costed.at[c, column], reverse=higher_better)[0]
    value, base_value = (
        float(costed.at[pick, column]),
        costed.at[baseline, column] if baseline in costed.index else None,
    )
    result.update(
        cell=pick, cost_value=value, baseline_cost=None if pd.isna(base_value) else float(base_value)
    )
    against = (
        _change(value, float(base_value))
        if base_value and not pd.isna(base_value)
        else "baseline cost unknown"
    )
    shown = _shown(value, cost)
    result["line"] = (
        f"recommend {pick}: recall >= {EFFECTIVE_RECALL:g} at every tested length up to {tested[-1]:,} and not "
        f"significantly below {baseline} at any (Holm-adjusted exact McNemar, alpha {SIGNIFICANCE:g}); cheapest by "
        f"{_COST_WORDS[cost]}: {shown} ({against})"
    )
    return result


def study_numbers(cells: Sequence[CellData], baseline: str, cost: str) -> StudyNumbers:
    """Every figure of a study from the cells that ran (the baseline among them)."""
    base = next(cell for cell in cells if cell.label == baseline)
    others = [cell for cell in cells if cell.label != baseline]
    tests = _tests(base, others)
    table = pd.DataFrame([_cell_row(cell, baseline) for cell in cells])
    pooled = tests[tests["family"] == "pooled"].set_index("cell")
    table["p_value"] = [pooled["p_value"].get(c) for c in table["cell"]]
    table["p_holm"] = [pooled["p_holm"].get(c) for c in table["cell"]]
    table["worse"] = [bool(pooled["worse"].get(c, False)) for c in table["cell"]]
    lengths = _lengths(cells)
    return StudyNumbers(
        cells=table,
        tests=tests,
        lengths=lengths,
        misses=_misses(cells),
        recommendation=recommend(table, tests, lengths, baseline, cost),
    )


def _records(frame: pd.DataFrame) -> list[dict[str, Any]]:
    """JSON-ready rows: NaN -> None, numpy scalars -> Python."""
    clean = frame.astype(object).where(frame.notna(), None)
    return [
        {k: (v.item() if hasattr(v, "item") else v) for k, v in row.items()}
        for row in clean.to_dict("records")
    ]


def numbers_json(numbers: StudyNumbers) -> dict[str, Any]:
    """study.json's `numbers` and `recommendation`."""
    return {
        "correction": CORRECTION,
        "alpha": SIGNIFICANCE,
        "numbers": {
            "cells": _records(numbers.cells),
            "tests": _records(numbers.tests),
            "lengths": _records(numbers.lengths),
            "misses": _records(numbers.misses),
        },
        "recommendation": numbers.recommendation,
    }


def recommend_by_cliff(
    cliffs: dict[str, tuple[int | None, int | None]], costs: dict[str, float | None], baseline: str, cost: str
) -> dict[str, Any]:
    """With searched cliffs (no shared lengths, so no paired tests): the cheapest cell whose cliff is not
    below the baseline's (its last holding length at least the baseline's), stated against the baseline."""
    _, higher_better = _COST_COLUMN[cost]
    base_held = cliffs[baseline][0]
    restoring = [
        c for c, (held, _) in cliffs.items() if held is not None and (base_held is None or held >= base_held)
    ]
    result: dict[str, Any] = {
        "cost": cost,
        "eligible": restoring,
        "holding": restoring,
        "cell": None,
        "line": "",
    }
    candidates = [c for c in restoring if costs.get(c) is not None]
    if not candidates:
        fell = [f for _, f in cliffs.values() if f is not None]
        first = min(fell) if fell else None
        result["first_failing_length"] = first
        result["line"] = (
            f"no cell restores recall at lengths >= {first:,}" if first else "no cell held recall"
        )
        return result
    pick = sorted(candidates, key=lambda c: costs[c], reverse=higher_better)[0]  # type: ignore[arg-type,return-value]
    value, base_value = float(costs[pick]), costs.get(baseline)  # type: ignore[arg-type]
    against = _change(value, float(base_value)) if base_value else "baseline cost unknown"
    held = cliffs[pick][0]
    result.update(cell=pick, cost_value=value, baseline_cost=base_value)
    result["line"] = (
        f"recommend {pick}: its cliff is not below {baseline}'s (recall >= {EFFECTIVE_RECALL:g} up to "
        f"{held:,} tokens, the baseline's up to {base_held:,} tokens); cheapest by {_COST_WORDS[cost]}: "
        f"{_shown(value, cost)} ({against})"
        if base_held is not None
        else f"recommend {pick}: cheapest by {_COST_WORDS[cost]} among the cells holding recall: "
        f"{_shown(value, cost)} ({against})"
    )
    return result


def cliff_rows(
    cliffs: dict[str, tuple[int | None, int | None]],
    frames: dict[str, pd.DataFrame],
    kv_bytes: dict[str, float | None],
    baseline: str,
) -> list[dict[str, Any]]:
    """The cells' table of a searched study: each cell's bracket (its effective length is the last length
    that held), speed over every case the search sent, memory; the recall columns are the search's pooled
    over lengths (not a figure to compare: the cells were measured at different lengths)."""
    rows = []
    for label, (held, fell) in cliffs.items():
        row = _cell_row(CellData(label, frames[label], kv_bytes.get(label)), baseline)
        row.update(
            effective_length=held, cliff_held=held, cliff_fell=fell, p_value=None, p_holm=None, worse=False
        )
        rows.append(row)
    return rows
