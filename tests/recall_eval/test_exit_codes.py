"""Exit codes a CI job gates on: parsing --fail-under / --retry, and the verdict of a finished run."""

from __future__ import annotations

from pathlib import Path

import pytest

from recall_eval.api.gating import gate_compare, regressions
from recall_eval.api.records import RunRecord
from recall_eval.errors import BadInput
from recall_eval.exit_codes import (
    EXIT_BELOW_GATE,
    EXIT_NO_ANSWER,
    EXIT_OK,
    RecallGate,
    Regression,
    compare_verdict,
    parse_fail_under,
    parse_retry,
    verdict,
)
from recall_eval.stats import mcnemar_exact
from recall_eval.types import Result, Run, RunSpec

SUITES = ("needle", "config")


def results(suite: str, passes: int, misses: int, infra: int = 0) -> list[Result]:
    outcomes = ["pass"] * passes + ["miss"] * misses + ["too_long"] * infra
    return [
        Result(
            case_id=f"{suite}-{i}",
            suite=suite,
            variant="default",
            outcome=outcome,
            target_tokens=1000,
            depth_percent=50.0,
            started_at=0.0,
            finished_at=1.0,
        )
        for i, outcome in enumerate(outcomes)
    ]


def test_parse_fail_under():
    assert parse_fail_under("0.95", SUITES) == RecallGate(0.95, {})
    assert parse_fail_under("needle=0.98,config=0.8", SUITES) == RecallGate(
        None, {"needle": 0.98, "config": 0.8}
    )
    assert parse_fail_under("0.9, needle=1", SUITES) == RecallGate(0.9, {"needle": 1.0})
    for bad, message in [
        ("", "empty"),
        ("95", "not a recall between 0 and 1"),
        ("abc", "not a number"),
        ("multiturn=0.9", "suite 'multiturn' is not in this run"),
        ("0.9,0.8", "two overall"),
        ("needle=0.9,needle=0.8", "given twice"),
    ]:
        with pytest.raises(BadInput, match=message):
            parse_fail_under(bad, SUITES)


def test_parse_retry_takes_infrastructure_outcomes_only():
    assert parse_retry("error,timeout") == {"error", "timeout"}
    with pytest.raises(BadInput, match="infrastructure outcomes only"):
        parse_retry("miss")
    with pytest.raises(BadInput):
        parse_retry(",")


def test_no_live_answer_is_its_own_exit_code():
    found = verdict(results("needle", 0, 0, infra=10))
    assert found.exit_code == EXIT_NO_ANSWER
    assert found.lines == ("no case got an answer from a live model (too_long 10): nothing was measured",)
    assert verdict([]).exit_code == EXIT_NO_ANSWER


def test_gate_overall_and_per_suite():
    run = results("needle", 49, 1) + results("config", 8, 2, infra=3)  # needle 0.98, config 0.80
    assert verdict(run).exit_code == EXIT_OK
    assert verdict(run, RecallGate(0.9, {})) == verdict(run, RecallGate(0.9, {}))
    overall = verdict(run, RecallGate(0.96, {}))
    assert overall.exit_code == EXIT_BELOW_GATE
    assert overall.lines == ("overall: recall 0.950 (57/60) below --fail-under 0.96",)
    per_suite = verdict(run, RecallGate(None, {"needle": 0.98, "config": 0.85}))
    assert per_suite.exit_code == EXIT_BELOW_GATE
    assert per_suite.lines == ("config: recall 0.800 (8/10) below --fail-under 0.85",)  # needle meets 0.98
    assert verdict(run, RecallGate(0.9, {"needle": 0.98, "config": 0.8})).exit_code == EXIT_OK


def record(*parts: list[Result]) -> RunRecord:
    """A stored run of these results (same case ids across records: the compare pairs them)."""
    results = [result for part in parts for result in part]
    suites = tuple(dict.fromkeys(result.suite for result in results))
    spec = RunSpec(suites=suites, lengths=(1000,), depths=(50.0,))
    return RunRecord(path=Path("."), run=Run(run_id="r", spec=spec, created_at=0.0), results=tuple(results))


def test_compare_verdict_judges_every_variant_like_a_sweep():
    variants = [("A", results("needle", 10, 0)), ("B", results("needle", 7, 3))]
    assert compare_verdict(variants) == compare_verdict(variants, RecallGate(0.7, {}))
    assert compare_verdict(variants).exit_code == EXIT_OK
    missed = compare_verdict(variants, RecallGate(None, {"needle": 0.8}))
    assert missed.exit_code == EXIT_BELOW_GATE
    assert missed.lines == ("variant B, needle: recall 0.700 (7/10) below --fail-under 0.8",)
    both = compare_verdict(variants, RecallGate(1.0, {}))
    assert both.lines == ("variant B, overall: recall 0.700 (7/10) below --fail-under 1",)


def test_a_compare_variant_that_measured_nothing_exits_3_before_any_gate():
    drop = Regression("B", "A", "needle", 1.0, 0.0, 12, 0, 0.0005, 0.05)
    variants = [("A", results("needle", 1, 9)), ("B", results("needle", 0, 0, infra=4))]
    ending = compare_verdict(variants, RecallGate(0.9, {}), [drop])
    assert ending.exit_code == EXIT_NO_ANSWER
    assert ending.lines == (
        "variant B, no case got an answer from a live model (too_long 4): nothing was measured",
    )


def test_regressions_use_the_reports_paired_test_per_suite_and_overall():
    base = record(results("needle", 12, 0), results("config", 6, 0))
    broken = record(results("needle", 0, 12), results("config", 6, 0))
    found = regressions(["A", "B"], [base, broken])
    assert [(r.variant, r.baseline, r.suite) for r in found] == [("B", "A", "needle"), ("B", "A", "overall")]
    needle = found[0]
    assert (needle.recall_baseline, needle.recall_variant, needle.lost, needle.gained) == (1.0, 0.0, 12, 0)
    assert needle.p_value == mcnemar_exact(12, 0) and needle.alpha == 0.05
    assert needle.line() == (
        "variant B, needle: recall 1.000 -> 0.000 against A, 12 pass->miss and 0 miss->pass on paired "
        f"cases, exact McNemar p = {mcnemar_exact(12, 0):.2g}, Holm-adjusted p over 3 tests = "
        f"{3 * mcnemar_exact(12, 0):.2g} < 0.05 (--fail-on-regression)"
    )
    assert regressions(["B", "A"], [broken, base]) == []  # a gain is not a regression
    few = record(results("needle", 7, 5), results("config", 6, 0))  # 5 flips: p = 0.0625
    assert regressions(["A", "C"], [base, few]) == []
    assert regressions(["A", "A2"], [base, base]) == []


def test_regressions_are_judged_after_holm_over_every_test_of_the_compare():
    # 6 pass->miss of 12 needles: exact McNemar p = 1/32, below 0.05 alone
    alone_base, alone_half = record(results("needle", 12, 0)), record(results("needle", 6, 6))
    (alone,) = regressions(["A", "B"], [alone_base, alone_half])
    assert alone.p_value == mcnemar_exact(6, 0) < 0.05 and alone.line().endswith(
        f"p = {mcnemar_exact(6, 0):.2g} < 0.05 (--fail-on-regression)"
    )  # a family of one: no correction named
    # the same loss beside an unchanged suite: needle, config and overall are 3 tests, and Holm lifts
    # the two p = 1/32 to 2/32 and 3/32, above the alpha: a compare of 3 tests is not a regression there
    base = record(results("needle", 12, 0), results("config", 6, 0))
    half = record(results("needle", 6, 6), results("config", 6, 0))
    assert regressions(["A", "B"], [base, half]) == []
    # a second variant adds its own tests to the family: a clear loss still counts
    broken = record(results("needle", 0, 12), results("config", 6, 0))
    found = regressions(["A", "B", "C"], [base, half, broken])
    assert [(r.variant, r.suite, r.family) for r in found] == [("C", "needle", 6), ("C", "overall", 6)]


def test_gate_compare_fails_on_a_regression_only_when_asked():
    base, broken = record(results("needle", 12, 0)), record(results("needle", 0, 12))
    assert gate_compare(["A", "B"], [base, broken]).exit_code == EXIT_OK
    gated = gate_compare(["A", "B"], [base, broken], fail_on_regression=True)
    assert gated.exit_code == EXIT_BELOW_GATE
    assert [line.split(":")[0] for line in gated.lines] == ["variant B, needle"]  # one suite: no overall
    assert gate_compare(["A", "B"], [base, base], fail_on_regression=True).exit_code == EXIT_OK


def _scored(suite: str, scores: list[float]) -> list[Result]:
    return [
        Result(
            case_id=f"{suite}-{i}",
            suite=suite,
            variant="default",
            outcome="pass" if score == 1 else "miss",
            target_tokens=1000,
            depth_percent=0.0,
            started_at=0.0,
            finished_at=1.0,
            score=score,
            params={"metric": "string_match_all", "task": suite},
        )  # fmt: skip
        for i, score in enumerate(scores)
    ]


def test_scored_suites_are_gated_on_their_mean_score():
    vt = _scored("vt", [1.0, 0.6, 0.8])  # mean 0.8; recall (score 1) would be 1/3
    ok = verdict(vt, RecallGate(overall=0.75, per_suite={"vt": 0.8}))
    assert ok.exit_code == EXIT_OK
    low = verdict(vt, RecallGate(per_suite={"vt": 0.85}))
    assert low.exit_code == EXIT_BELOW_GATE and low.lines == (
        "vt: mean score 0.800 (3 answered) below --fail-under 0.85",
    )
    # mixed: overall is the pass/miss suites' recall (needle 2/2), not pulled down by the scored suite
    mixed = verdict(vt + results("needle", 2, 0), RecallGate(overall=0.9))
    assert mixed.exit_code == EXIT_OK


def test_scored_suites_regress_on_their_scores_and_pass_miss_ones_on_mcnemar():
    # needle unchanged; vt: every score 1.0 -> 0.5 (all 8 pass -> "miss", but graded by score, not flips);
    # cwe: 8 cases 0.5 -> 1.0 (a gain). Wilcoxon on 8 equal-sign differences: p = 2 / 2**8.
    base = record(results("needle", 12, 0), _scored("vt", [1.0] * 8), _scored("cwe", [0.5] * 8))
    changed = record(results("needle", 12, 0), _scored("vt", [0.5] * 8), _scored("cwe", [1.0] * 8))
    found = regressions(["A", "B"], [base, changed])
    assert [(type(r).__name__, r.suite) for r in found] == [("ScoreRegression", "vt")]
    (drop,) = found
    assert (drop.test.paired, drop.test.lower, drop.test.changed) == (8, 8, 8)
    assert drop.test.p_value == pytest.approx(2 / 2**8) and drop.test.mean_diff == pytest.approx(-0.5)
    assert drop.line() == (
        "variant B, vt: mean score 100.0 → 50.0 (-50.0), 0 higher / 8 lower of 8 paired cases, "
        "Wilcoxon signed-rank p = 0.0078 (n = 8) against A, Holm-adjusted p over 4 tests = 0.031 < 0.05 "
        "(--fail-on-regression)"
    )
    # both scored suites dropping: each, and the scored cases together ("overall"); no McNemar line
    worse = record(results("needle", 12, 0), _scored("vt", [0.5] * 8), _scored("cwe", [0.0] * 8))
    assert [r.suite for r in regressions(["A", "C"], [base, worse])] == ["vt", "cwe", "overall"]
    gated = gate_compare(["A", "B"], [base, changed], fail_on_regression=True)
    assert gated.exit_code == EXIT_BELOW_GATE and gated.lines == (drop.line(),)


def test_study_verdict_three_for_a_worse_cell_then_the_gate() -> None:
    """A study ends 3 when a cell is significantly worse after correction (its lines first), else 4 for a
    cell below --fail-under (named "cell LABEL, ..."), else 0."""
    from recall_eval.exit_codes import EXIT_CELL_WORSE, parse_fail_under, study_verdict
    from tests.reports.compare_builders import result

    good = [result(f"c{i}", "pass", 256) for i in range(4)]
    half = [result(f"c{i}", "pass" if i % 2 else "miss", 256) for i in range(4)]
    cells = [("bf16", good), ("fp8", half)]
    worse = study_verdict(
        cells, ["cell fp8: recall significantly below bf16"], parse_fail_under("0.9", ["needle"])
    )
    assert worse.exit_code == EXIT_CELL_WORSE == 4 and worse.lines == (
        "cell fp8: recall significantly below bf16",
    )
    gated = study_verdict(cells, [], parse_fail_under("0.9", ["needle"]))
    assert gated.exit_code == 4 and gated.lines == (
        "cell fp8, overall: recall 0.500 (2/4) below --fail-under 0.9",
    )
    assert study_verdict(cells, []).exit_code == 0
