"""Scoring rules: pass/miss/empty/truncated, code-shaped hedges, distractors, infra never recall."""

from __future__ import annotations

import pytest

from recall_eval.scoring import (
    code_shaped_strings,
    other_codes,
    score_answer,
    score_completion,
)
from recall_eval.types import Completion

VALUE = ("ZEBRA-4492-OMEGA",)


@pytest.mark.parametrize(
    ("text", "codes"),
    [
        ("The code is ZEBRA-4492-OMEGA.", ["ZEBRA-4492-OMEGA"]),
        ("A7F3Q and 4492-1187", ["A7F3Q", "4492-1187"]),
        ("OMEGA 12345 hello world", []),
        ("x1 ab12", []),  # shorter than 5 characters
        ("--AB-123--", ["AB-123"]),
        ("under_score_9", ["under_score_9"]),
        ("**ZEBRA-4492-OMEGA**", ["ZEBRA-4492-OMEGA"]),
    ],
)
def test_code_shaped(text, codes):
    assert code_shaped_strings(text) == codes


@pytest.mark.parametrize(
    ("answer", "finish", "outcome"),
    [
        ("ZEBRA-4492-OMEGA", "stop", "pass"),
        ("the value is zebra-4492-omega.", "stop", "pass"),
        ("The code for KESTREL-17 is ZEBRA-4492-OMEGA", "stop", "pass"),  # one other code: the key
        ("ZEBRA-4492-OMEGA or LION-1111-ALPHA or TIGER-2222-BETA", "stop", "miss"),  # a guess list
        ("ZEBRA-4492-OMEGA-X1", "stop", "pass"),  # contains the value
        ("ZEBRA-4492", "stop", "miss"),
        ("LION-1111-ALPHA", "stop", "miss"),
        ("", "stop", "empty"),
        ("  \n ", "stop", "empty"),
        ("", "length", "truncated"),
        ("The value you are looking for is ZEB", "length", "truncated"),
        ("ZEBRA-4492-OMEGA and then", "length", "pass"),
        ("I don't know", None, "miss"),
    ],
)
def test_score_answer(answer, finish, outcome):
    assert score_answer(answer, VALUE, (), finish)[0] == outcome


def test_distractor_with_value_is_a_miss():
    outcome, why = score_answer("ZEBRA-4492-OMEGA (or maybe LYNX-0001-DELTA)", VALUE, ("LYNX-0001-DELTA",))
    assert outcome == "miss" and "distractor" in why
    assert score_answer("ZEBRA-4492-OMEGA", VALUE, ("LYNX-0001-DELTA",))[0] == "pass"


def test_any_expected_value_passes():
    assert score_answer("port 8080", ("8080", "eight thousand eighty"))[0] == "pass"


def test_other_codes_ignores_parts_of_the_value():
    assert other_codes("ZEBRA-4492-OMEGA / zebra-4492-omega", VALUE) == set()
    assert other_codes("A1B2C3 ZEBRA-4492-OMEGA", VALUE) == {"a1b2c3"}


def test_score_completion_uses_answer_text_not_reasoning():
    completion = Completion(text="no idea", reasoning="maybe ZEBRA-4492-OMEGA", finish_reason="stop")
    assert score_completion(completion, VALUE).outcome == "miss"
