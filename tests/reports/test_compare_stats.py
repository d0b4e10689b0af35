"""Compare statistics against independently computed values (scipy, worked cases)."""

from __future__ import annotations

import random

import numpy as np
import pytest
from scipy.stats import binomtest, bootstrap

from recall_eval import stats
from recall_eval.types import Outcome, Result
from reports.aggregates import as_frame
from reports.compare_frames import compare_frames, speed_changes
from tests.reports.compare_builders import paired_results, result, variant


def paired_test(a: list, b: list) -> stats.PairedTest:
    return stats.paired_test(as_frame(a), as_frame(b))


def test_worked_case_counts_and_p_value() -> None:
    # 5 gained, 1 lost, 3 both pass, 2 both fail: p = 2 * P(X <= 1 | n=6, 1/2) = 2 * 7/64 by hand.
    pairs: list[tuple[Outcome, Outcome, int]] = (
        [("miss", "pass", 1000)] * 5 + [("pass", "miss", 1000)] + [("pass", "pass", 1000)] * 3
    )
    pairs += [("miss", "empty", 1000), ("truncated", "miss", 1000)]
    a, b = paired_results(pairs)
    test = paired_test(a, b)
    assert (test.gained, test.lost, test.both_pass, test.both_fail) == (5, 1, 3, 2)
    assert test.paired == 11
    assert test.p_value == pytest.approx(14 / 64)


def test_no_discordant_pairs_gives_p_one() -> None:
    a, b = paired_results([("pass", "pass", 500), ("miss", "miss", 500)])
    assert paired_test(a, b).p_value == 1.0


@pytest.mark.parametrize("seed", range(12))
def test_p_value_matches_scipy_binomtest(seed: int) -> None:
    rng = random.Random(seed)
    outcomes: tuple[Outcome, ...] = ("pass", "miss", "empty")
    pairs = [(rng.choice(outcomes), rng.choice(outcomes), 1000) for _ in range(rng.randint(5, 200))]
    a, b = paired_results(pairs)
    test = paired_test(a, b)
    lost = sum(x == "pass" and y != "pass" for x, y, _ in pairs)
    gained = sum(x != "pass" and y == "pass" for x, y, _ in pairs)
    assert (test.lost, test.gained) == (lost, gained)
    expected = binomtest(min(lost, gained), lost + gained, 0.5).pvalue if lost + gained else 1.0
    assert test.p_value == pytest.approx(expected, rel=1e-9, abs=1e-300)


def test_large_one_sided_flip_matches_scipy() -> None:
    a, b = paired_results([("miss", "pass", 4509)] * 38)
    test = paired_test(a, b)
    assert test.p_value == pytest.approx(binomtest(0, 38, 0.5).pvalue)
    assert test.p_value == pytest.approx(2 * 0.5**38)


def test_infrastructure_pairs_are_excluded_and_counted() -> None:
    pairs: list[tuple[Outcome, Outcome, int]] = [
        ("pass", "oom", 1000),  # would be a loss if oom were a miss
        ("pass", "oom", 1000),
        ("timeout", "pass", 1000),  # would be a gain
        ("crash", "too_long", 1000),
        ("miss", "pass", 1000),
    ]
    a, b = paired_results(pairs)
    b.append(result("only-in-b", "pass", 1000))
    test = paired_test(a, b)
    assert test.excluded_infra == 4
    assert (test.gained, test.lost, test.paired) == (1, 0, 1)
    assert test.unpaired == 1
    assert test.p_value == pytest.approx(binomtest(0, 1, 0.5).pvalue)


def test_per_length_tests_and_wilson_intervals_match_scipy() -> None:
    pairs: list[tuple[Outcome, Outcome, int]] = []
    pairs += [("pass", "pass", 1000)] * 9 + [("miss", "pass", 1000)]
    pairs += [("pass", "pass", 4000)] * 2 + [("miss", "pass", 4000)] * 7 + [("miss", "oom", 4000)]
    a, b = paired_results(pairs)
    frames = compare_frames([variant("fp8", a), variant("bf16", b)])
    pair = frames.pairs[0]
    assert pair.by_length[1000].gained == 1 and pair.by_length[4000].gained == 7
    assert pair.by_length[4000].excluded_infra == 1
    assert pair.by_length[4000].p_value == pytest.approx(binomtest(0, 7, 0.5).pvalue)
    assert pair.overall.gained == 8
    a_frame, b_frame = frames.variants
    # fp8 at 4000: 2 passes of 10 answered; bf16 at 4000: 9 of 9 answered (the oom is not a miss).
    for frame, length, k, n in ((a_frame, 4000, 2, 10), (b_frame, 4000, 9, 9), (a_frame, 1000, 9, 10)):
        assert (frame.lengths[length].passes, frame.lengths[length].answered) == (k, n)
        ci = binomtest(k, n).proportion_ci(confidence_level=0.95, method="wilson")
        row = frame.lengths[length]
        assert (row.ci_low, row.ci_high) == pytest.approx((ci.low, ci.high), abs=1e-12)
    assert a_frame.effective_length == 1000
    assert b_frame.effective_length == 4000


def test_difference_grid_is_b_minus_a_per_cell() -> None:
    a = [result("x1", "pass", 1000, 0.0), result("x2", "miss", 1000, 100.0), result("x3", "miss", 2000, 0.0)]
    a += [result("x4", "pass", 2000, 100.0)]
    b = [result("x1", "pass", 1000, 0.0), result("x2", "pass", 1000, 100.0), result("x3", "oom", 2000, 0.0)]
    b += [result("x4", "miss", 2000, 100.0)]
    grid = compare_frames([variant("A", a), variant("B", b)]).pairs[0].diff_grids["needle"]
    assert grid.lengths == (1000, 2000) and grid.depths == (0.0, 100.0)
    assert grid.values == ((0.0, None), (1.0, -1.0))


def test_throughput_change_in_percent() -> None:
    pairs: list[tuple[Outcome, Outcome, int]] = [("pass", "pass", 2000)] * 4
    a, b = paired_results(pairs, b_speed=1.25)
    pair = compare_frames([variant("A", a), variant("B", b)]).pairs[0]
    # decode: 8 tokens over 8 gaps of 0.02 s = 50 tok/s, B 62.5 tok/s: +25%; TTFT and prefill unchanged.
    assert pair.a.throughput.decode_tps == pytest.approx(50.0)
    assert pair.throughput_change["decode_tps"] == pytest.approx(25.0)
    assert pair.throughput_change["ttft_s"] == pytest.approx(0.0)
    assert pair.a.throughput.prefill_tps == pytest.approx(4000.0)


def test_memory_plan_read_from_nested_server_info() -> None:
    a, b = paired_results([("pass", "pass", 1000)])
    info_a = {"server_info": {"max_total_num_tokens": 100_000, "kv_bytes_per_token": 132}}
    info_b = {"max_total_num_tokens": 87_000, "kv_bytes_per_token": 256}
    frames = compare_frames([variant("A", a, server_info=info_a), variant("B", b, server_info=info_b)])
    mem_a, mem_b = frames.variants[0].memory, frames.variants[1].memory
    assert (mem_a.max_total_num_tokens, mem_a.kv_bytes_per_token) == (100_000, 132)
    assert (mem_b.max_total_num_tokens, mem_b.kv_bytes_per_token) == (87_000, 256)
    assert mem_a.time_to_ready_s == 3.0


def test_speed_sign_test_matches_scipy() -> None:
    # Decode gaps per case: B faster on 7 cases, slower on 2, tied on 1; TTFT lower (better) on 3, higher on 1.
    a_gaps = [0.02] * 10
    b_gaps = [0.01] * 7 + [0.04] * 2 + [0.02]
    a_ttft = [0.5] * 10
    b_ttft = [0.4] * 3 + [0.6] + [0.5] * 6
    a = [result(f"s{i}", "pass", 1000, itl_s=a_gaps[i], ttft_s=a_ttft[i]) for i in range(10)]
    b = [result(f"s{i}", "miss", 1000, itl_s=b_gaps[i], ttft_s=b_ttft[i]) for i in range(10)]
    b.append(result("s-oom", "oom", 1000))  # no completion: not timed
    tests = speed_changes(as_frame(a), as_frame(b), interleaved=True)
    decode, ttft = tests["decode_tps"], tests["ttft_s"]
    assert (decode.better, decode.worse) == (7, 2)
    assert decode.p_value == pytest.approx(binomtest(2, 9, 0.5).pvalue)
    assert (ttft.better, ttft.worse) == (3, 1)
    assert ttft.p_value == pytest.approx(binomtest(1, 4, 0.5).pvalue)
    # Prefill = prompt tokens / TTFT: better exactly where TTFT is lower.
    assert (tests["prefill_tps"].better, tests["prefill_tps"].worse) == (3, 1)


def test_sequential_runs_get_an_interval_over_cases_and_no_p_value() -> None:
    a_gaps = [0.02, 0.021, 0.019, 0.02, 0.022, 0.018]
    b_gaps = [0.016, 0.02, 0.015, 0.017, 0.019, 0.018]
    a = [result(f"s{i}", "pass", 1000, itl_s=g) for i, g in enumerate(a_gaps)]
    b = [result(f"s{i}", "pass", 1000, itl_s=g) for i, g in enumerate(b_gaps)]
    decode = speed_changes(as_frame(a), as_frame(b), interleaved=False)["decode_tps"]
    assert decode.p_value is None
    changes = np.array([(ga / gb - 1) * 100 for ga, gb in zip(a_gaps, b_gaps, strict=True)])
    assert decode.median_change_pct == pytest.approx(float(np.median(changes)))
    want = bootstrap(
        (changes,), np.median, n_resamples=2000, method="percentile", rng=np.random.default_rng(0)
    )
    ci = want.confidence_interval
    assert (decode.ci_low_pct, decode.ci_high_pct) == pytest.approx((ci.low, ci.high))
    assert decode.ci_low_pct <= decode.median_change_pct <= decode.ci_high_pct


def _scored(case_id: str, outcome: Outcome, score: float | None, suite: str = "vt") -> Result:
    base = result(case_id, outcome, 4096, suite=suite)
    return base.model_copy(update={"score": score, "params": {"metric": "string_match_all", "task": suite}})


def test_scored_pairs_mean_difference_t_interval_and_wilcoxon_by_hand() -> None:
    # B - A per case: -1, -0.5, -0.5, -0.25, +0.25, 0 (a tie, dropped by Wilcoxon), then one pair left
    # out for an infrastructure outcome, one case stored only under A, and a pass/miss case (McNemar's)
    pairs = [(1.0, 0.0), (1.0, 0.5), (0.5, 0.0), (0.75, 0.5), (0.25, 0.5), (1.0, 1.0)]
    a = [_scored(f"s{i}", "pass" if x == 1 else "miss", x) for i, (x, _) in enumerate(pairs)]
    b = [_scored(f"s{i}", "pass" if y == 1 else "miss", y) for i, (_, y) in enumerate(pairs)]
    a += [_scored("infra", "pass", 1.0), _scored("only-a", "pass", 1.0), result("needle", "pass", 4096)]
    b += [_scored("infra", "oom", None), result("needle", "miss", 4096)]
    test = stats.scored_paired_test(as_frame(a), as_frame(b))
    assert (test.paired, test.higher, test.lower, test.changed) == (6, 1, 4, 5)
    assert (test.excluded_infra, test.unpaired) == (1, 1)
    assert test.mean_a == pytest.approx(4.5 / 6) and test.mean_b == pytest.approx(2.5 / 6)
    assert test.mean_diff == pytest.approx(-2 / 6)
    # t interval by hand: mean -1/3, sample sd of the six differences, t(0.975, 5 df) = 2.5706
    diffs = np.array([-1, -0.5, -0.5, -0.25, 0.25, 0])
    half = 2.5706 * diffs.std(ddof=1) / np.sqrt(6)
    assert (test.ci_low, test.ci_high) == pytest.approx((-1 / 3 - half, -1 / 3 + half), abs=1e-4)
    # Wilcoxon on the 5 non-zero differences: |d| ranks 1->5, 0.5,0.5 -> 3.5, 0.25,0.25 -> 1.5; the
    # positive rank sum is 1.5 (the +0.25). Exact two-sided p over the 2**5 sign patterns (ties kept):
    ranks = np.array([5, 3.5, 3.5, 1.5, 1.5])
    sums = [ranks[[bool(m >> k & 1) for k in range(5)]].sum() for m in range(32)]
    expected_p = sum(s <= 1.5 or s >= ranks.sum() - 1.5 for s in sums) / 32
    assert test.p_value == pytest.approx(expected_p)
    assert test.lower_at(0.5) and not test.higher_at(0.5)
    # the pass/miss case is McNemar's alone: the scored cases are not in it
    mcnemar = stats.paired_test(as_frame(a), as_frame(b))
    assert (mcnemar.paired, mcnemar.lost, mcnemar.gained) == (1, 1, 0)


def test_scored_pairs_without_a_change_have_p_one_and_a_point_interval() -> None:
    a = [_scored(f"s{i}", "miss", 0.5) for i in range(3)]
    test = stats.scored_paired_test(as_frame(a), as_frame(a))
    assert (test.changed, test.p_value, test.mean_diff, test.ci_low, test.ci_high) == (0, 1.0, 0.0, 0.0, 0.0)
    nothing = stats.scored_paired_test(
        as_frame([result("n", "pass", 1000)]), as_frame([result("n", "miss", 1000)])
    )
    assert nothing.paired == 0 and nothing.mean_diff is None and nothing.p_value == 1.0


def test_a_scored_suites_difference_grid_is_in_mean_score() -> None:
    a = variant("A", [_scored("s0", "pass", 1.0), _scored("s1", "miss", 0.5)])
    b = variant("B", [_scored("s0", "miss", 0.25), _scored("s1", "miss", 0.25)])
    pair = compare_frames([a, b]).pairs[0]
    grid = pair.diff_grids["vt"]
    assert grid.scored and grid.values == ((pytest.approx(0.25 - 0.75),),)
    assert pair.by_suite == {} and pair.scored_by_suite["vt"].paired == 2


@pytest.mark.parametrize("seed", range(40))
def test_interleaved_interval_and_significance_come_from_one_test(seed: int) -> None:
    """Interleaved runs: the per-case interval is the sign test's own, so it excludes 0 exactly when the
    sign test's p is below the alpha, and the conclusion never puts an interval that excludes 0 beside
    "not significant" (before: a bootstrap interval beside a sign test, "TTFT -5.5% (95% CI -11.6% to
    -2.3%), not significant, sign test p=0.064"). Random per-case TTFTs, 6 to 30 cases, some shifted."""
    from reports.compare_conclusion import _speed_clause

    rng = np.random.default_rng(seed)
    n = int(rng.integers(6, 31))
    shift = float(rng.normal(0, 0.04))
    a_ttft = rng.uniform(0.4, 0.6, n)
    b_ttft = a_ttft * (1 + shift + rng.normal(0, 0.06, n))
    a = [result(f"s{i}", "pass", 1000, ttft_s=float(a_ttft[i])) for i in range(n)]
    b = [result(f"s{i}", "pass", 1000, ttft_s=float(b_ttft[i])) for i in range(n)]
    ttft = speed_changes(as_frame(a), as_frame(b), interleaved=True)["ttft_s"]
    assert ttft.p_value is not None
    excludes_zero = ttft.ci_low_pct is not None and (ttft.ci_low_pct > 0 or ttft.ci_high_pct < 0)
    assert excludes_zero == (ttft.p_value < stats.SIGNIFICANCE), ttft
    frames = compare_frames([variant("A", a), variant("B", b)], interleaved=True)
    clause = _speed_clause(frames.pairs[0])
    if excludes_zero:
        assert "TTFT" in clause and "not significant" not in clause.split("prefill")[0], clause


def test_a_pooled_effective_length_is_never_one_variants() -> None:
    """Over two suites the conclusion names each suite's own effective length that changed, never the
    pooled figure as if it were one suite's."""
    from reports.compare_conclusion import _details

    needle_a = [result(f"n{n}", "pass", n, suite="needle") for n in (1000, 2000, 4000)]
    needle_b = [
        result(f"n{n}", "pass" if n < 4000 else "miss", n, suite="needle") for n in (1000, 2000, 4000)
    ]
    config = [result(f"c{n}", "pass", n, suite="config") for n in (1000, 2000, 4000)]
    frames = compare_frames([variant("A", needle_a + config), variant("B", needle_b + config)])
    details = "; ".join(_details(frames.pairs[0]))
    assert "effective length needle 4,000 → 2,000 tokens" in details, details
    assert "config" not in details  # unchanged: not mentioned
