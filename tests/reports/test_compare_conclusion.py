"""The verdict paragraph, from constructed results."""

from __future__ import annotations

from dataclasses import replace

from recall_eval.formatting import format_p
from recall_eval.types import Outcome
from reports.compare_conclusion import conclusion
from reports.compare_frames import compare_frames
from tests.reports.compare_builders import paired_results, result, variant

Pairs = list[tuple[Outcome, Outcome, int]]


def test_significant_recovery_from_a_length_up() -> None:
    pairs: Pairs = []
    for length in (1000, 2000):
        pairs += [("pass", "pass", length)] * 20
    for length in (4509, 8000):
        pairs += [("miss", "pass", length)] * 19 + [("pass", "pass", length)]
    a, b = paired_results(pairs, b_speed=1.095)
    info_a = {"max_total_num_tokens": 100_000}
    info_b = {"max_total_num_tokens": 87_000}
    text = conclusion(
        compare_frames([variant("fp8", a, server_info=info_a), variant("bf16", b, server_info=info_b)])
    )
    assert text.startswith(
        "bf16 raises recall over fp8 from 4,509 tokens up: 38 cases flip miss→pass, 0 pass→miss"
    )
    assert "p < 0.001" in text
    assert "recall 52% → 100%" in text
    assert "effective length 2,000 → 8,000 tokens" in text
    assert "decode speed +9.5% (the same on every timed case)" in text  # faster on all 80 cases
    assert "sequential runs, under 1 min apart: not a controlled speed comparison" in text
    assert "per-case median difference: TTFT +0.0% (" in text  # all ties: no test to report
    assert "KV slots -13.0%" in text
    assert text.endswith(".")


def test_significant_loss_names_lengths() -> None:
    pairs: Pairs = (
        [("pass", "pass", 1000)] * 10 + [("pass", "miss", 2000)] * 12 + [("pass", "pass", 4000)] * 3
    )
    pairs += [("pass", "miss", 8000)] * 3
    a, b = paired_results(pairs)
    text = conclusion(compare_frames([variant("topk=1024", a), variant("topk=128", b)]))
    assert text.startswith("topk=128 loses recall against topk=1024 at 2,000 and 8,000 tokens: ")
    assert "0 cases flip miss→pass, 15 pass→miss, p < 0.001" in text


def test_nothing_significant_is_said_plainly() -> None:
    pairs: Pairs = [("miss", "pass", 1000)] * 3 + [("pass", "miss", 1000)] * 2 + [("pass", "pass", 1000)] * 5
    a, b = paired_results(pairs)
    text = conclusion(compare_frames([variant("fp8", a), variant("bf16", b)]))
    assert text.startswith(
        "No significant recall difference between bf16 and fp8: 3 cases flip miss→pass, 2 pass→miss"
    )
    assert "p = 1" in text
    assert "10 paired cases" in text
    assert "raises" not in text and "loses" not in text


def test_borderline_but_not_significant() -> None:
    # 5 gained, 0 lost: p = 2/32 = 0.0625, not below 0.05.
    a, b = paired_results([("miss", "pass", 1000)] * 5)
    text = conclusion(compare_frames([variant("A", a), variant("B", b)]))
    assert text.startswith("No significant recall difference between B and A")
    assert "p = 0.062" in text


def test_full_agreement_and_infrastructure_exclusions() -> None:
    pairs: Pairs = [("pass", "pass", 1000)] * 4 + [("pass", "oom", 2000)] * 2 + [("timeout", "pass", 2000)]
    a, b = paired_results(pairs)
    text = conclusion(compare_frames([variant("A", a), variant("B", b)]))
    assert text.startswith("B and A agree on all 4 paired cases")
    assert "3 pairs left out of the test for infrastructure outcomes (A: 1 timeout; B: 2 oom)" in text


def test_no_paired_answers() -> None:
    a, b = paired_results([("oom", "pass", 1000), ("pass", "crash", 1000)])
    text = conclusion(compare_frames([variant("A", a), variant("B", b)]))
    assert text.startswith("B vs A: no case was answered by both servers")


def test_each_variant_against_the_first() -> None:
    base, better = paired_results([("miss", "pass", 1000)] * 12)
    _, same = paired_results([("miss", "miss", 1000)] * 12)
    text = conclusion(compare_frames([variant("A", base), variant("B", better), variant("C", same)]))
    assert "B raises recall over A at every length: 12 cases flip" in text
    assert "C and A agree on all 12 paired cases" in text


def test_format_p() -> None:
    assert format_p(0.0004) == "p < 0.001"
    assert format_p(0.0123) == "p = 0.012"
    assert format_p(1.0) == "p = 1"


def test_speed_change_within_noise_is_called_not_significant() -> None:
    a = [result(f"n{i}", "pass", 1000, itl_s=0.02) for i in range(6)]
    # B's median decode is faster, but per case it is faster on 4 and slower on 2: p = 0.69.
    b = [result(f"n{i}", "pass", 1000, itl_s=gap) for i, gap in enumerate([0.01] * 4 + [0.03] * 2)]
    text = conclusion(compare_frames([variant("A", a), variant("B", b)], interleaved=True))
    assert "sign test p = 0.69" in text and "not significant" in text
    assert "interleaved runs, per-case median change: TTFT +0.0%" in text
    assert "decode speed +100.0% (95% CI " in text
    assert "sequential" not in text


def test_sequential_speed_change_has_an_interval_and_no_p_value() -> None:
    a = [result(f"n{i}", "pass", 1000, itl_s=0.02) for i in range(6)]
    b = [
        result(f"n{i}", "pass", 1000, itl_s=gap, started_at=1_700_000_000.0 + 8 * 60)
        for i, gap in enumerate([0.01] * 4 + [0.03] * 2)
    ]
    text = conclusion(compare_frames([variant("A", a), variant("B", b)]))
    assert (
        "sequential runs, 8 min apart: not a controlled speed comparison; per-case median difference: "
        "TTFT +0.0% (the same on every timed case), prefill speed +0.0% (the same on every timed case), "
        "decode speed +100.0% (95% CI "
    ) in text
    assert "p = 0.69" not in text and "sign test" not in text


def test_headline_is_the_per_case_median_never_the_change_of_medians() -> None:
    """The issue's case: the change of the medians (+100% here) is not the per-case median change
    (+44.6%). The verdict states only the per-case median (with the sign test's interval where the cases
    allow one: five pairs are too few for a 95% order-statistic interval, so none is printed)."""
    speed_a = [100.0, 50.0, 200.0, 100.0, 80.0]
    factors = [1.27, 1.27, 1.446, 2.0, 3.0]
    a = [result(f"n{i}", "pass", 1000, itl_s=1 / v) for i, v in enumerate(speed_a)]
    b = [
        result(f"n{i}", "pass", 1000, itl_s=1 / (v * f))
        for i, (v, f) in enumerate(zip(speed_a, factors, strict=True))
    ]
    frames = compare_frames([variant("fp8", a), variant("bf16", b)], interleaved=True)
    text = conclusion(frames)
    change = frames.pairs[0].speed_changes["decode_tps"]
    assert round(change.median_change_pct, 1) == 44.6
    medians = frames.pairs[0].throughput_change["decode_tps"]
    assert f"decode speed {change.median_change_pct:+.1f}%, not significant, sign test" in text
    assert change.ci_low_pct is None and "95% CI" not in text  # no interval the sign test cannot give
    assert round(medians) == 100 and "+100.0%" not in text  # the change of the medians: never in it


def test_reused_run_shows_its_age() -> None:
    a, b = paired_results([("pass", "pass", 1000)] * 4)
    runs = [variant("fp8", a), variant("bf16", b)]
    runs[0] = replace(runs[0], reused=True, age_s=8 * 60 + 5)
    text = conclusion(compare_frames(runs))
    assert "fp8: run reused, finished 8 min before this compare" in text
    assert "bf16: run reused" not in text
