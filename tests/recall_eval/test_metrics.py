"""The metric scorers against values computed by hand (RULER's string_match_all / _part, MRCR's grade)."""

from __future__ import annotations

import pytest

from recall_eval.metrics import (
    METRICS,
    mrcr_score,
    ruler_prediction,
    ruler_task_score,
    score_metric,
    string_match_all,
    string_match_part,
)
from recall_eval.types import Completion


def test_string_match_all_is_the_share_of_references_found_case_insensitively():
    refs = ["ALPHA", "beta", "Gamma", "delta"]
    assert string_match_all("alpha and GAMMA", refs) == 0.5  # 2 of 4
    assert string_match_all("alphabetagammadelta", refs) == 1.0  # substrings count
    assert string_match_all("nothing", refs) == 0.0
    assert string_match_all("12345", ["1234567"]) == 0.0  # a prefix of the value is not the value
    assert string_match_all("x", []) == 0.0


def test_string_match_part_is_one_when_any_reference_is_found():
    assert string_match_part("the answer is Paris, France", ["paris", "Lyon"]) == 1.0
    assert string_match_part("Marseille", ["paris", "Lyon"]) == 0.0


def test_ruler_cleaning_and_task_score():
    assert ruler_prediction("  a\x07b\tc \n") == "a\nb\nc"
    # RULER reports 100 x mean, rounded to 2 decimals: (1 + 0 + 2/3) / 3 = 0.5555... -> 55.56
    assert ruler_task_score([1.0, 0.0, 2 / 3]) == 55.56
    assert ruler_task_score([]) == 0.0


def test_mrcr_grade_needs_the_prefix_then_is_sequence_matcher_ratio():
    prefix = "aB3xY9"
    answer = prefix + "abcd"
    assert mrcr_score("abcd", answer, prefix) == 0.0  # no prefix at the start
    assert mrcr_score(" " + prefix + "abcd", answer, prefix) == 0.0  # not at the very start
    assert mrcr_score(prefix + "abcd", answer, prefix) == 1.0
    # "abcf" vs "abcd": 3 matching characters, ratio = 2*3/(4+4) = 0.75
    assert mrcr_score(prefix + "abcf", answer, prefix) == pytest.approx(0.75)
    # "ab" vs "abcd": 2*2/(2+4) = 2/3
    assert mrcr_score(prefix + "ab", answer, prefix) == pytest.approx(2 / 3)


def test_score_metric_gives_outcomes_beside_the_score():
    refs = ("1234567", "7654321")
    full = score_metric(
        Completion(text="1234567 and 7654321", finish_reason="stop"), "string_match_all", refs, {}
    )
    half = score_metric(Completion(text="1234567", finish_reason="stop"), "string_match_all", refs, {})
    cut = score_metric(Completion(text="1234567 and", finish_reason="length"), "string_match_all", refs, {})
    blank = score_metric(Completion(text="  ", finish_reason="stop"), "string_match_all", refs, {})
    assert (full[0], full[2]) == ("pass", 1.0)
    assert (half[0], half[2]) == ("miss", 0.5)
    assert (cut[0], cut[2]) == ("truncated", 0.5)
    assert (blank[0], blank[2]) == ("empty", 0.0)
    mrcr = score_metric(Completion(text="PFXabcf"), "mrcr", ("PFXabcd",), {"prefix": "PFX"})
    assert mrcr[2] == pytest.approx(0.75)
    with pytest.raises(ValueError, match="unknown metric"):
        score_metric(Completion(text="x"), "bleu", ("x",), {})
    assert set(METRICS) == {"string_match_all", "string_match_part", "mrcr"}
