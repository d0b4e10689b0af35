"""recall_eval.stats against worked cases computed by hand and against the defining equations (never
against the scipy call it wraps)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import norm

from recall_eval.frame import frame_of
from recall_eval.stats import (
    PairedTest,
    ScoredPairedTest,
    effective_length,
    mcnemar_exact,
    median_change_ci,
    paired_test,
    paired_tests_by,
    percentile,
    recall_table,
    wilson_interval,
)
from recall_eval.types import Outcome, Result


def _result(outcome: Outcome, n: int = 0) -> Result:
    return Result(
        case_id=f"c{n}",
        suite="needle",
        variant="default",
        outcome=outcome,
        target_tokens=1000,
        depth_percent=50.0,
        started_at=0.0,
        finished_at=1.0,
    )


def _wilson_by_quadratic(k: int, n: int, z: float) -> tuple[float, float]:
    """Independent route: the Wilson bounds are the roots in p of (phat - p)^2 = z^2 p (1 - p) / n."""
    phat = k / n
    a = 1 + z * z / n
    b = -(2 * phat + z * z / n)
    c = phat * phat
    disc = math.sqrt(b * b - 4 * a * c)
    return ((-b - disc) / (2 * a), (-b + disc) / (2 * a))


@pytest.mark.parametrize("k,n", [(0, 1), (1, 1), (0, 10), (3, 10), (10, 10), (37, 40), (500, 1000), (1, 3)])
def test_wilson_matches_the_quadratic_roots(k: int, n: int) -> None:
    z = norm.ppf(0.975)
    lo, hi = wilson_interval(k, n)
    want_lo, want_hi = _wilson_by_quadratic(k, n, z)
    assert lo == pytest.approx(max(0.0, want_lo), abs=1e-12)
    assert hi == pytest.approx(min(1.0, want_hi), abs=1e-12)


@pytest.mark.parametrize("k,n", [(7, 9), (0, 5), (5, 5), (45, 80), (1, 3)])
def test_wilson_bounds_satisfy_the_score_equation(k: int, n: int) -> None:
    """The Wilson bounds are the p where the score test is at the edge: (k/n - p)^2 = z^2 p (1 - p) / n
    (an open bound at 0 or 1 is clipped there)."""
    z, phat = norm.ppf(0.975), k / n
    for p in wilson_interval(k, n):
        if p in (0.0, 1.0) and p == phat:
            continue
        assert (phat - p) ** 2 == pytest.approx(z * z * p * (1 - p) / n, rel=1e-9, abs=1e-15)


def test_wilson_worked_case_and_edges() -> None:
    # 8 of 10 at z = 1.96: centre (0.8 + 0.19208) / 1.38416, half-width 1.96/1.38416 * sqrt(0.016 + 0.009604)
    # gives 0.4901568-0.9433191; the exact 95% quantile z = 1.959964 moves the 6th digit.
    lo, hi = wilson_interval(8, 10)
    assert lo == pytest.approx(0.4901568, abs=1e-5)
    assert hi == pytest.approx(0.9433191, abs=1e-5)
    assert wilson_interval(0, 0) is None  # nothing answered: no interval to show
    assert wilson_interval(0, 4)[0] == 0.0
    assert wilson_interval(4, 4)[1] == 1.0
    with pytest.raises(ValueError):
        wilson_interval(3, 2)


def test_recall_counts_only_model_answers() -> None:
    outcomes: list[Outcome] = [
        "pass",
        "pass",
        "miss",
        "empty",
        "truncated",
        "oom",
        "too_long",
        "crash",
        "timeout",
    ]
    results = [_result(o, i) for i, o in enumerate(outcomes)]
    row = recall_table(frame_of([(None, results)])).iloc[0]
    assert (row["passes"], row["answered"], row["infra"], row["cases"]) == (2, 5, 4, 9)
    assert row["recall"] == pytest.approx(0.4)
    low, high = _wilson_by_quadratic(2, 5, norm.ppf(0.975))
    assert (row["ci_low"], row["ci_high"]) == pytest.approx((low, high), abs=1e-12)
    infra_only = recall_table(frame_of([(None, [_result("oom"), _result("error", 1)])])).iloc[0]
    assert np.isnan(infra_only["recall"]) and np.isnan(infra_only["ci_low"])


def test_recall_table_groups() -> None:
    results = [_result("pass", 0), _result("miss", 1), _result("oom", 2)]
    results.append(_result("pass", 3).model_copy(update={"target_tokens": 2000}))
    table = recall_table(frame_of([(None, results)]), ["target_tokens"])
    assert table["recall"].to_dict() == {1000: 0.5, 2000: 1.0}
    assert table["infra"].to_dict() == {1000: 1, 2000: 0}


def test_median_change_interval() -> None:
    assert median_change_ci([5.0]) is None
    assert median_change_ci([3.0, 3.0, 3.0]) == (3.0, 3.0)
    low, high = median_change_ci([1.0, 2.0, 3.0, 4.0, 10.0, -2.0])
    assert -2.0 <= low <= float(np.median([1.0, 2.0, 3.0, 4.0, 10.0, -2.0])) <= high <= 10.0


def test_effective_length_worked_cases() -> None:
    assert effective_length({338: 1.0, 1000: 0.95, 4000: 0.9, 8000: 0.5, 16000: 1.0}) == 4000
    assert effective_length({1000: 0.85, 4000: 1.0}) is None
    assert effective_length({4000: 1.0, 1000: 1.0}) == 4000  # order of the mapping does not matter
    assert effective_length({1000: 1.0, 2000: None, 4000: 1.0}) == 1000  # unknown recall ends the run
    assert effective_length({1000: 0.7, 2000: 0.65}, threshold=0.7) == 1000
    assert effective_length({}) is None
    assert effective_length({1000: 1.0, 2000: float("nan"), 4000: 1.0}) == 1000


def _two_sided_binomial_by_sum(b: int, c: int) -> float:
    """Twice the smaller tail of Binomial(b + c, 1/2), summed with exact integers."""
    n = b + c
    tail = sum(math.comb(n, i) for i in range(min(b, c) + 1))
    return min(1.0, 2 * tail / 2**n)


@pytest.mark.parametrize("b,c", [(0, 0), (1, 0), (5, 1), (3, 3), (10, 2), (0, 12), (40, 25), (700, 650)])
def test_mcnemar_exact_is_the_two_sided_binomial_tail(b: int, c: int) -> None:
    assert mcnemar_exact(b, c) == pytest.approx(_two_sided_binomial_by_sum(b, c), rel=1e-9, abs=1e-15)


def test_mcnemar_worked_case() -> None:
    # 6 discordant pairs all one way: 2 * (1/2)^6 = 0.03125
    assert mcnemar_exact(6, 0) == 0.03125
    # 1 vs 5: 2 * (1 + 6) / 64
    assert mcnemar_exact(1, 5) == pytest.approx(14 / 64)


# values sorted: 0.05 0.12 0.31 0.9 0.9 1.7 2.2; the q-th percentile sits at position 6q/100,
# interpolated linearly between its neighbours (worked by hand)
@pytest.mark.parametrize(
    "q,want", [(0, 0.05), (5, 0.071), (25, 0.215), (50, 0.9), (73.3, 1.2184), (95, 2.05), (100, 2.2)]
)
def test_percentile_worked_cases(q: float, want: float) -> None:
    values = [0.31, 0.05, 1.7, 0.9, 0.9, 2.2, 0.12]
    assert percentile(values, q) == pytest.approx(want, abs=1e-12)


def test_percentile_edges() -> None:
    assert percentile([], 50) is None
    assert percentile([4.0], 95) == 4.0
    assert percentile([1.0, 3.0], 50) == 2.0
    with pytest.raises(ValueError):
        percentile([1.0], 101)


def test_paired_tests_by_splits_scopes_and_picks_each_scopes_test() -> None:
    """The one scope split of compare, the baseline gate and a study: keys in the order given (one in
    neither frame left out), lengths as Python ints, McNemar for pass/miss scopes, Wilcoxon for scored."""

    def case(n: int, suite: str, length: int, outcome: Outcome, score: float | None = None) -> Result:
        result = _result(outcome, n).model_copy(update={"suite": suite, "target_tokens": length})
        if score is None:
            return result
        return result.model_copy(update={"score": score, "params": {"metric": "string_match_all"}})

    a = [case(i, "needle", 1000 * (1 + i % 2), "pass") for i in range(6)]
    b = [case(i, "needle", 1000 * (1 + i % 2), "miss" if i < 4 else "pass") for i in range(6)]
    a += [case(10 + i, "ruler", 1000, "pass", 1.0) for i in range(3)]
    b += [case(10 + i, "ruler", 1000, "miss", 0.5) for i in range(3)]
    fa, fb = frame_of([(None, a)]), frame_of([(None, b)])
    by_suite = paired_tests_by(fa, fb, "suite", ["ruler", "absent", "needle"])
    assert list(by_suite) == ["ruler", "needle"]
    assert isinstance(by_suite["needle"], PairedTest) and (
        by_suite["needle"].lost,
        by_suite["needle"].gained,
    ) == (4, 0)
    assert by_suite["needle"].p_value == mcnemar_exact(4, 0)
    assert isinstance(by_suite["ruler"], ScoredPairedTest) and by_suite["ruler"].mean_diff == pytest.approx(
        -0.5
    )
    by_length = paired_tests_by(fa, fb, "target_tokens", test=paired_test)
    assert list(by_length) == [1000, 2000] and all(type(key) is int for key in by_length)
    assert (by_length[1000].lost, by_length[2000].lost) == (2, 2)  # scored rows left to scored_paired_test
