"""Stored baselines and the gate against them, function by function: the file (round trip, readers
ignoring fields they do not know, a newer format refused), what makes a baseline unfit for a run, the
paired statistics (Holm, Newcombe's interval), the tolerance, and --fail-fast's looks."""

from __future__ import annotations

import json
import math

import pytest

from recall_eval.api.baselines import parse_tolerance
from recall_eval.api.fail_fast import LOOKS, FailFastStop, Watch, interim_alpha
from recall_eval.baseline_gate import POOLED, baseline_tests, mismatch
from recall_eval.baseline_store import Baseline, baseline_of, read_baseline, write_baseline
from recall_eval.errors import BadInput, UserError
from recall_eval.exit_codes import RecallGate
from recall_eval.frame import frame_of
from recall_eval.stats import PairedTest, holm_adjust, mcnemar_exact, paired_drop_interval
from recall_eval.types import Result, Run, RunSpec

SPEC = RunSpec(suites=("needle", "config"), lengths=(338, 700), depths=(0.0, 100.0), trials=1)


def _result(case: str, suite: str, outcome: str, length: int = 338) -> Result:
    return Result(
        case_id=case,
        suite=suite,
        variant="default",
        outcome=outcome,
        strict_outcome=outcome,
        target_tokens=length,
        depth_percent=50.0,
        started_at=0.0,
        finished_at=1.0,
        answer="THE-SECRET-ANSWER",
    )


def _run(spec: RunSpec = SPEC) -> Run:
    return Run(
        run_id="r1",
        spec=spec,
        created_at=0.0,
        versions={"recall-eval": "0.1.0", "prompts": "abc", "suite:needle": "1"},
    )


def _baseline(results: list[Result], tolerance: float = 0.0) -> Baseline:
    return baseline_of(_run(), results, "main", {"engine": "reference", "api_key": "sk-x"}, tolerance, at=1.0)


def test_a_baseline_file_round_trips_without_answers_or_unlisted_facts(tmp_path):
    results = [_result("a", "needle", "pass"), _result("b", "needle", "miss"), _result("a", "needle", "miss")]
    path = write_baseline(tmp_path / "b.json", _baseline(results))
    text = path.read_text()
    assert "THE-SECRET-ANSWER" not in text and "sk-x" not in text  # no answer; target facts allow-listed
    back = read_baseline(path)
    assert [(c.case_id, c.outcome) for c in back.cases] == [
        ("a", "miss"),
        ("b", "miss"),
    ]  # the last result counts
    assert back.target == {"engine": "reference"} and back.run_spec == SPEC


def test_readers_ignore_fields_they_do_not_know_and_refuse_a_newer_format(tmp_path):
    path = write_baseline(tmp_path / "b.json", _baseline([_result("a", "needle", "pass")]))
    document = json.loads(path.read_text())
    document["signed_by"] = "a later writer"
    document["cases"][0]["latency"] = 1.5
    document["spec"]["a_new_spec_field"] = True
    path.write_text(json.dumps(document))
    assert read_baseline(path).run_spec == SPEC
    document["format_version"] = 2
    path.write_text(json.dumps(document))
    with pytest.raises(UserError, match="format 2 is newer than this recall-eval reads"):
        read_baseline(path)
    path.write_text("{not json")
    with pytest.raises(BadInput, match="not JSON"):
        read_baseline(path)
    with pytest.raises(BadInput, match="no such file"):
        read_baseline(tmp_path / "missing.json")


def test_mismatch_names_every_difference_and_accepts_another_package_version():
    baseline = _baseline([_result("a", "needle", "pass")])
    key = {"recall-eval": "9.9.9", "prompts": "abc", "suite:needle": "1"}
    assert mismatch(baseline, SPEC, "lenient", key) == []
    other = SPEC.model_copy(update={"lengths": (338,), "seed": 3})
    assert mismatch(baseline, other, "strict", key) == [
        "--lengths 338 here, 338,700 in the baseline",
        "--seed 3 here, 0 in the baseline",
        "--scoring strict here, lenient in the baseline",
    ]
    assert mismatch(baseline, SPEC, "lenient", {**key, "prompts": "def"}) == [
        "the rendered prompts differ from the baseline's (the suites' text changed)"
    ]
    assert mismatch(baseline, SPEC, "lenient", {**key, "suite:needle": "2"}) == [
        "suite:needle version 2 here, 1 in the baseline"
    ]


def test_holm_adjusts_step_down():
    assert holm_adjust([0.01, 0.04, 0.03]) == pytest.approx([0.03, 0.06, 0.06])
    assert holm_adjust([0.5, 0.001]) == pytest.approx([0.5, 0.002])
    assert holm_adjust([0.9, 0.8]) == [1.0, 1.0]  # capped at 1
    assert holm_adjust([0.04, 0.03, 0.001]) == pytest.approx([0.06, 0.06, 0.003])  # made monotone


def _paired(both_pass: int, lost: int, gained: int, both_fail: int) -> PairedTest:
    return PairedTest(both_pass, both_fail, lost, gained, 0, 0, mcnemar_exact(lost, gained))


def test_newcombe_interval_holds_its_point_and_flips_with_the_direction():
    drop, low, high = paired_drop_interval(_paired(12, 12, 0, 0))
    assert drop == 0.5 and 0.2 < low < 0.5 < high < 0.8
    back = paired_drop_interval(_paired(12, 0, 12, 0))
    assert back == pytest.approx((-drop, -high, -low))
    same = paired_drop_interval(_paired(40, 0, 0, 0))
    assert same[0] == 0 and same[1] < 0 < same[2]  # no change: the interval straddles 0
    assert paired_drop_interval(_paired(0, 0, 0, 0)) is None
    # many pairs: close to the Wald interval of the paired difference
    drop, low, high = paired_drop_interval(_paired(8000, 1200, 800, 0))
    se = math.sqrt((1200 + 800) / 10000 - (400 / 10000) ** 2) / math.sqrt(10000)
    assert low == pytest.approx(drop - 1.96 * se, abs=2e-3) and high == pytest.approx(
        drop + 1.96 * se, abs=2e-3
    )


def _frames(base: dict[str, str], cand: dict[str, str], suite: str = "needle"):
    b = [_result(case, suite, outcome) for case, outcome in base.items()]
    c = [_result(case, suite, outcome) for case, outcome in cand.items()]
    return _baseline(b).frame(), frame_of([(None, c)])


def test_the_gate_fails_a_significant_drop_and_the_tolerance_widens_it():
    cases = {f"n{i}": "pass" for i in range(24)}
    worse = {case: ("miss" if i < 12 else "pass") for i, case in enumerate(cases)}
    base, cand = _frames(cases, worse)
    (test,) = baseline_tests(base, cand, ["needle"])
    assert test.lost == 12 and test.p_value == pytest.approx(2 / 2**12) and test.worse
    (tolerant,) = baseline_tests(base, cand, ["needle"], tolerance=0.6)
    assert not tolerant.worse  # the drop's interval reaches below 60pp
    (narrow,) = baseline_tests(base, cand, ["needle"], tolerance=0.02)
    assert narrow.worse and "above tolerance 0.02" in narrow.line("main")
    (same,) = baseline_tests(*_frames(cases, cases), ["needle"])
    assert not same.worse and same.p_value == 1.0
    (better,) = baseline_tests(*_frames(worse, cases), ["needle"])
    assert better.gained == 12 and not better.worse


def test_suites_and_pooled_are_one_holm_family():
    base = [_result(f"n{i}", "needle", "pass") for i in range(8)] + [
        _result(f"c{i}", "config", "pass") for i in range(8)
    ]
    cand = [_result(f"n{i}", "needle", "miss") for i in range(8)] + [
        _result(f"c{i}", "config", "pass") for i in range(8)
    ]
    tests = baseline_tests(_baseline(base).frame(), frame_of([(None, cand)]), ["needle", "config"])
    assert [t.scope for t in tests] == ["needle", "config", POOLED]
    raw = [t.p_value for t in tests]
    assert [t.p_adjusted for t in tests] == pytest.approx(holm_adjust(raw))
    assert [t.worse for t in tests] == [True, False, True]  # needle: p 2/2**8 * 3 < 0.05


def test_parse_tolerance():
    assert parse_tolerance("2pp") == pytest.approx(0.02)
    assert parse_tolerance("2%") == pytest.approx(0.02)
    assert parse_tolerance("0.05") == pytest.approx(0.05)
    assert parse_tolerance(None) is None
    for bad in ("two", "150pp", "1"):
        with pytest.raises(BadInput, match="--tolerance"):
            parse_tolerance(bad)


def test_fail_fast_stops_at_the_first_look_that_clears_its_alpha_and_not_on_a_good_run():
    """24 planned cases: looks after 3, 5, 8, 10, ... cases, each at alpha 0.025/9; all lost pairs
    reach p = 2/2**k < 0.0028 first at k = 10 (look 4)."""
    assert interim_alpha() == pytest.approx(0.05 / 2 / (LOOKS - 1))
    cases = [f"n{i}" for i in range(24)]
    base = _baseline([_result(case, "needle", "pass") for case in cases]).frame()
    watch = Watch(24, ["needle"], "lenient", baseline=base, baseline_name="main")
    assert watch.marks == [3, 5, 8, 10, 12, 15, 17, 20, 22]
    with pytest.raises(FailFastStop) as stop:
        for case in cases:
            watch.observe(_result(case, "needle", "miss"))
    assert (stop.value.look, stop.value.spent, stop.value.planned) == (4, 10, 24)
    assert stop.value.exit_code == 4 and "needle: recall 1.000 -> 0.000" in stop.value.lines[0]
    good = Watch(24, ["needle"], "lenient", baseline=base)
    for case in cases:
        good.observe(_result(case, "needle", "pass"))
    assert good.look == LOOKS - 1  # every interim look taken, none stopped


def test_fail_fast_on_a_threshold_stops_when_the_interval_is_wholly_below_it():
    watch = Watch(40, ["needle"], "lenient", gate=RecallGate(0.9, {}))
    with pytest.raises(FailFastStop) as stop:
        for i in range(40):
            watch.observe(_result(f"n{i}", "needle", "miss"))
    # 0 of n: the upper end of the 99.44% Wilson interval z^2 / (n + z^2) is below 0.9 from n = 4 on
    assert stop.value.spent == 4 and "wholly below --fail-under 0.9" in stop.value.lines[0]


def test_a_scored_suite_is_tested_on_its_score_differences():
    """A scored suite (a metric grades each answer): the Wilcoxon signed-rank test on the per-case
    differences, in the same Holm family; the baseline file keeps the grades."""

    def scored(case: str, score: float) -> Result:
        return _result(case, "vt", "pass" if score == 1 else "miss").model_copy(
            update={"score": score, "params": {"metric": "string_match_all"}}
        )

    base = _baseline([scored(f"v{i}", 1.0) for i in range(10)])
    assert base.cases[0].metric == "string_match_all" and base.cases[0].score == 1.0
    cand = frame_of([(None, [scored(f"v{i}", 0.25) for i in range(10)])])
    (test,) = baseline_tests(base.frame(), cand, ["vt"])
    assert test.kind == "score" and test.lost == 10 and test.drop == pytest.approx(0.75)
    assert (
        test.worse
        and "mean score 1.000 -> 0.250" in test.line("main")
        and "Wilcoxon signed-rank" in test.line("main")
    )
