"""A study's statistics: Holm's adjustment, the per-cell McNemar family against the baseline, and the
recommendation (cheapest cell holding recall without a significant loss, or none)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from recall_eval.stats import holm_adjust, mcnemar_exact
from recall_eval.study_stats import CellData, study_numbers


def test_holm_matches_the_step_down_definition() -> None:
    """Holm by hand: sorted p (0.005, 0.01, 0.03, 0.04) x (4, 3, 2, 1) = (0.02, 0.03, 0.06, 0.04), running
    max (0.02, 0.03, 0.06, 0.06), returned in input order; capped at 1; empty in, empty out."""
    assert holm_adjust([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert holm_adjust([0.5, 0.9]) == [1.0, 1.0]
    assert holm_adjust([]) == []
    # never below the raw p, never above Bonferroni's
    raw = np.random.default_rng(1).uniform(0, 0.2, 12)
    adjusted = np.array(holm_adjust(list(raw)))
    assert (adjusted >= raw).all() and (adjusted <= np.minimum(raw * 12, 1) + 1e-12).all()


def frame(passes: list[bool], lengths: list[int], ttft: float = 0.1, tps: float = 50.0) -> pd.DataFrame:
    n = len(passes)
    return pd.DataFrame(
        {
            "case_id": [f"c{i}" for i in range(n)],
            "suite": ["needle"] * n,
            "target_tokens": lengths,
            "depth_percent": [50.0] * n,
            "outcome": ["pass" if p else "miss" for p in passes],
            "counted": [True] * n,
            "passed": passes,
            "metric": [None] * n,
            "ttft_s": [ttft + 0.001 * i for i in range(n)],
            "decode_tps": [tps + 0.1 * i for i in range(n)],
        }
    )


LENGTHS = [256] * 20 + [1024] * 20


def test_family_flags_the_cell_that_loses_and_recommends_the_cheapest_that_holds() -> None:
    """Baseline passes all 40 cases; `cheap` too at less memory; `lossy` misses all 20 at 1,024 (pooled
    McNemar 20 vs 0, p ~ 2e-6, Holm over two cells doubles it at most: still worse). The recommendation
    is `cheap` (cost memory), stated against the baseline; `lossy` is not eligible."""
    base = CellData("bf16", frame([True] * 40, LENGTHS), 256.0)
    cheap = CellData("fp8", frame([True] * 40, LENGTHS), 132.0)
    lossy = CellData("fp4", frame([True] * 20 + [False] * 20, LENGTHS), 68.0)
    numbers = study_numbers([base, cheap, lossy], "bf16", "memory")
    cells = numbers.cells.set_index("cell")
    assert cells.at["fp4", "p_value"] == pytest.approx(mcnemar_exact(20, 0))
    assert cells.at["fp4", "p_holm"] == pytest.approx(min(1.0, 2 * mcnemar_exact(20, 0)))
    assert cells.at["fp4", "worse"] and not cells.at["fp8", "worse"]
    assert cells.at["fp4", "effective_length"] == 256 and cells.at["fp8", "effective_length"] == 1024
    per_length = numbers.tests[
        (numbers.tests["cell"] == "fp4") & (numbers.tests["scope"] == "length:1024")
    ].iloc[0]
    assert per_length["lost"] == 20 and per_length["worse"]
    rec = numbers.recommendation
    assert rec["cell"] == "fp8" and rec["eligible"] == ["bf16", "fp8"]
    assert "recommend fp8" in rec["line"] and "-48.4% vs the baseline" in rec["line"]
    misses = numbers.misses[numbers.misses["cell"] == "fp4"].set_index("length")
    assert misses.at[1024, "misses"] == 20 and misses.at[256, "misses"] == 0
    # decode as the cost: the fastest holding cell
    faster = CellData("fast", frame([True] * 40, LENGTHS, tps=80.0), 300.0)
    assert study_numbers([base, cheap, faster], "bf16", "decode").recommendation["cell"] == "fast"


def test_no_cell_restores_recall() -> None:
    """When every cell (the baseline too) falls below 0.9 at 1,024, the answer says no cell restores recall
    at lengths >= 1,024."""
    half = [True] * 20 + [True, False] * 10
    numbers = study_numbers(
        [CellData("a", frame(half, LENGTHS), 10.0), CellData("b", frame(half, LENGTHS), 5.0)], "a", "memory"
    )
    assert numbers.recommendation["cell"] is None
    assert numbers.recommendation["line"].startswith("no cell restores recall at lengths >= 1,024")


def test_recommendation_by_searched_cliffs() -> None:
    """Searched cliffs (no shared lengths): the cheapest cell whose cliff is not below the baseline's; none
    when every other cell's cliff is lower and the baseline itself fell at the range's start."""
    from recall_eval.study_stats import recommend_by_cliff

    cliffs = {"bf16": (4000, 4200), "fp8": (4100, 4300), "fp4": (1000, 1050)}
    rec = recommend_by_cliff(cliffs, {"bf16": 256.0, "fp8": 132.0, "fp4": 68.0}, "bf16", "memory")
    assert rec["cell"] == "fp8" and rec["eligible"] == ["bf16", "fp8"]
    assert "not below bf16's" in rec["line"] and "-48.4% vs the baseline" in rec["line"]
    none = recommend_by_cliff({"a": (None, 500), "b": (None, 500)}, {"a": 1.0, "b": 2.0}, "a", "memory")
    assert none["cell"] is None and none["line"] == "no cell restores recall at lengths >= 500"


def test_a_scored_suite_counts_its_full_mark_cases_as_passes() -> None:
    """A study of RULER tasks alone (scored suites: `metric` set, `outcome` pass only at full marks, as
    recall_eval.metrics.score_metric gives it) has recall, speed and a McNemar test per cell: a cell that
    loses full marks on 20 of 40 cases is flagged, not shown as 0 answered with p = 1."""

    def scored(passes: list[bool]) -> pd.DataFrame:
        return frame(passes, LENGTHS).assign(suite="niah_single_1", metric="string_match_all")

    base = CellData("bf16", scored([True] * 40), 256.0)
    lossy = CellData("fp4", scored([True] * 20 + [False] * 20), 68.0)
    numbers = study_numbers([base, lossy], "bf16", "memory")
    cells = numbers.cells.set_index("cell")
    assert cells.at["bf16", "answered"] == 40 and cells.at["bf16", "recall"] == 1.0
    assert cells.at["fp4", "passes"] == 20 and cells.at["fp4", "ttft_s"] is not None
    assert cells.at["fp4", "p_value"] == pytest.approx(mcnemar_exact(20, 0)) and cells.at["fp4", "worse"]
    assert numbers.recommendation["cell"] == "bf16"
