from __future__ import annotations

import re
from itertools import pairwise

import pytest
import tiktoken

from recall_eval.errors import BadInput
from recall_eval.types import CaseRecipe
from suites.filler import FillerText
from suites.needle import NEEDLE_TEMPLATES, NeedleParams, NeedleRecipe, needle_recipes
from suites.values import CODE_RE, code_words, key_names

GRID = NeedleParams(lengths=(1000, 4000, 16000), depths=(0, 25, 50, 75, 100), trials=3, seed=7)


def _recipes(params: NeedleParams = GRID) -> list[NeedleRecipe]:
    return needle_recipes(params)


def test_recipes_follow_the_protocol_and_cover_the_grid() -> None:
    recipes = _recipes()
    assert len(recipes) == 3 * 5 * 3
    assert all(isinstance(r, CaseRecipe) for r in recipes)
    cells = {(r.target_tokens, r.depth_percent, r.trial) for r in recipes}
    assert len(cells) == 45


def test_deterministic_for_a_seed() -> None:
    first = [r.render(300) for r in _recipes()]
    second = [r.render(300) for r in _recipes()]
    assert first == second
    other = [r.render(300) for r in _recipes(NeedleParams(GRID.lengths, GRID.depths, GRID.trials, seed=8))]
    # another seed, same grid: other needles in every cell, and other case ids
    assert {c.expected for c in first}.isdisjoint({c.expected for c in other})
    assert {c.id for c in first}.isdisjoint({c.id for c in other})


def test_ids_are_stable_unique_and_independent_of_filler_words() -> None:
    recipes = _recipes()
    ids = [r.render(0).id for r in recipes]
    assert len(set(ids)) == len(ids)
    for recipe in recipes[:10]:
        assert recipe.render(10).id == recipe.render(5000).id == recipe.id
    assert re.fullmatch(r"[0-9a-f]{16}", ids[0])
    # A cell keeps its id (and its fact) when the grid around it changes.
    small = needle_recipes(NeedleParams(lengths=(4000,), depths=(50,), trials=3, seed=7))
    by_cell = {(r.target_tokens, r.depth_percent, r.trial): r for r in recipes}
    for recipe in small:
        twin = by_cell[(recipe.target_tokens, recipe.depth_percent, recipe.trial)]
        assert twin.id == recipe.id and twin.fact == recipe.fact


def test_values_distinct_across_the_grid_and_from_the_eval_pool() -> None:
    recipes = needle_recipes(
        NeedleParams(lengths=(1000, 2000, 4000, 8000), depths=range(0, 101, 5), trials=4, seed=1)
    )
    values = [r.fact.value for r in recipes]
    assert len(set(values)) == len(values)
    for recipe in recipes:
        first, _, second = recipe.fact.value.split("-")
        assert first in code_words("eval") and recipe.fact.key.split()[0] in key_names("eval")


def test_templates_vary_deterministically() -> None:
    used = {r.fact.template for r in _recipes()}
    assert used == set(range(len(NEEDLE_TEMPLATES)))


@pytest.mark.parametrize("filler_words", [0, 1, 7, 120, 999, 5000, 40000])
def test_needle_present_once_with_a_correct_span(filler_words: int) -> None:
    for recipe in _recipes()[::7]:
        case = recipe.render(filler_words)
        (message,) = case.messages
        assert message.role == "user"
        value = case.expected[0]
        assert message.content.count(value) == 1
        assert message.content[case.needle.char_start : case.needle.char_end] == value
        assert message.content.count(recipe.fact.sentence) == 1
        assert message.content.endswith("\n\n" + recipe.fact.question)
        assert CODE_RE.findall(message.content) == [value]
        haystack = message.content[: -len(recipe.fact.question) - 2]
        assert len(haystack.split()) == filler_words + len(recipe.fact.sentence.split())
        assert case.params["filler_words"] == filler_words and case.params["key"] == recipe.fact.key


@pytest.mark.parametrize("depth", [0, 10, 33, 50, 90, 100])
def test_needle_sits_at_a_sentence_boundary_at_the_requested_depth(depth: float) -> None:
    params = NeedleParams(lengths=(8000,), depths=(depth,), trials=2, seed=3)
    for recipe in needle_recipes(params):
        for filler_words in (200, 1500, 6000):
            case = recipe.render(filler_words)
            content = case.messages[0].content
            start = content.index(recipe.fact.sentence)
            words_before = len(content[:start].split())
            assert abs(words_before - depth / 100 * filler_words) <= 40
            assert words_before == case.params["needle_word_index"]
            if depth == 0:
                assert start == 0
            elif depth == 100:
                assert words_before == filler_words
            before = content[:start].rstrip()
            assert before == "" or FillerText.ends_sentence(before)
            after = content[start + len(recipe.fact.sentence) :].lstrip(" ")
            assert after.startswith("\n\n") or after[0].isupper() or after[:2] == '"' + after[1:2].upper()


def test_render_is_monotone_in_characters_and_tokens(encoder: tiktoken.Encoding) -> None:
    for recipe in _recipes()[::9]:
        chars = [len(recipe.render(n).messages[0].content) for n in range(0, 300)]
        assert all(b > a for a, b in pairwise(chars))
        sizes = list(range(0, 300)) + list(range(2000, 2200)) + [10000, 20000, 40000]
        tokens = [len(encoder.encode(recipe.render(n).messages[0].content)) for n in sizes]
        assert all(b >= a for a, b in pairwise(tokens)), recipe


def test_words_guess_lands_near_the_target(encoder: tiktoken.Encoding) -> None:
    for recipe in needle_recipes(NeedleParams(lengths=(500, 4000, 20000), depths=(50,), trials=1, seed=0)):
        sample = recipe.render(2000).messages[0].content
        tokens_per_word = len(encoder.encode(sample)) / len(sample.split())
        guess = recipe.words_guess(tokens_per_word)
        tokens = len(encoder.encode(recipe.render(guess).messages[0].content))
        assert abs(tokens - recipe.target_tokens) < 0.1 * recipe.target_tokens + 30


@pytest.mark.parametrize(
    ("params", "message"),
    [
        (NeedleParams(lengths=(), depths=(50,), trials=1, seed=0), "no context lengths"),
        (NeedleParams(lengths=(0,), depths=(50,), trials=1, seed=0), "positive integers"),
        (NeedleParams(lengths=(100,), depths=(101,), trials=1, seed=0), "between 0 and 100"),
        (NeedleParams(lengths=(100,), depths=(50,), trials=0, seed=0), "at least 1"),
        (NeedleParams(lengths=(100,), depths=(50,), trials=1, seed=10**9), "training data"),
    ],
)
def test_bad_grids_are_one_line_errors(params: NeedleParams, message: str) -> None:
    with pytest.raises(BadInput, match=message):
        needle_recipes(params)
