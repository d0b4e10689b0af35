"""Exit codes a CI job gates on: parsing --fail-under / --retry, and the verdict of a finished run."""

from __future__ import annotations

import pytest

from recall_eval.errors import BadInput
from recall_eval.types import Result
from recall_eval.verdict import (
    EXIT_BELOW_GATE,
    EXIT_NO_ANSWER,
    EXIT_OK,
    RecallGate,
    parse_fail_under,
    parse_retry,
    verdict,
)

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
