"""Calibration with a real tokenizer (tiktoken's offline cl100k_base) on real needle recipes.

The same search against the reference server's own /v1/tokenize is tested in tests/e2e.
"""

from __future__ import annotations

import pytest

import suites
from recall_eval.calibration import CalibrationCache, Calibrator, UntrustedCounts, recipe_id, tolerance
from recall_eval.tokenization import TIKTOKEN_NAME, PromptRefused, TiktokenTokenizer

LENGTHS = (338, 1350, 5391, 22597)
DEPTHS = (0.0, 50.0, 100.0)


@pytest.fixture(scope="module")
def tokenizer() -> TiktokenTokenizer:
    return TiktokenTokenizer()


def _recipes(lengths=LENGTHS, depths=DEPTHS, trials=1, seed=0):
    return suites.build_recipes("needle", lengths, depths, trials, seed)


def test_tolerance():
    assert tolerance(338) == 8 and tolerance(799) == 8 and tolerance(800) == 8
    assert tolerance(22597) == 225 and tolerance(5000) == 50


async def test_every_case_within_tolerance_with_exact_needle_offsets(tokenizer):
    recipes = _recipes()
    cases = await Calibrator(tokenizer).calibrate(recipes)
    assert [case.id for case in cases] == [recipe_id(recipe) for recipe in recipes]
    for case in cases:
        measured = await tokenizer.count_messages(case.messages)
        assert case.prompt_tokens == measured
        assert abs(measured - case.target_tokens) <= tolerance(case.target_tokens), case.id
        assert case.tokenizer == TIKTOKEN_NAME
        tokens = await tokenizer.tokenize_messages(case.messages)
        span = tokenizer.encoding.decode(
            [t for t in tokens[case.needle_token_offset : case.needle_token_end] if t >= 0]
        )
        assert case.expected[0] in span, (span, case.expected)
        # the token before the fact does not already contain the value's first character
        before = tokenizer.encoding.decode([t for t in tokens[: case.needle_token_offset] if t >= 0])
        assert case.expected[0] not in before
    by_depth = {case.depth_percent: case.needle_token_offset for case in cases if case.target_tokens == 22597}
    assert by_depth[0.0] < by_depth[50.0] < by_depth[100.0]


async def test_cache_makes_a_second_build_free_and_identical(tokenizer, tmp_path):
    recipes = _recipes(depths=(25.0, 75.0))
    cold = Calibrator(tokenizer, CalibrationCache())
    first = await cold.calibrate(recipes)
    assert cold.tokenize_calls > 0
    cold.cache.save(tmp_path)
    warm = Calibrator(tokenizer, CalibrationCache.load(tmp_path))
    second = await warm.calibrate(recipes)
    assert warm.tokenize_calls == 0
    assert second == first


async def test_subset_calibration_equals_full_calibration(tokenizer):
    """Resume calibrates only unfinished cases: they must come out exactly as in a full build."""
    recipes = _recipes(trials=2)
    full = await Calibrator(tokenizer, concurrency=1).calibrate(recipes)
    wanted = {case.id for case in full[5:]}
    subset = await Calibrator(tokenizer, concurrency=7).calibrate(recipes, only=wanted)
    assert subset == full[5:]


async def test_target_below_every_form_is_not_applicable_with_the_reason(tokenizer):
    (case,) = await Calibrator(tokenizer).calibrate(_recipes(lengths=(20,), depths=(50.0,)))
    bare = await tokenizer.count_messages(case.messages)
    assert case.prompt_tokens == bare > 20 + tolerance(20)
    assert case.not_applicable is not None and f"takes {bare} tokens" in case.not_applicable
    assert "20-token target" in case.not_applicable and case.tokenizer == TIKTOKEN_NAME


async def test_short_targets_use_smaller_forms_of_the_same_case_before_giving_up(tokenizer):
    """338 tokens: too short for most full config documents, but every format fits in a smaller layout,
    and multi-turn facts=4 fits; 100 tokens: some forms still fit, others are not applicable."""
    lengths, depths = (100, 338), (0.0, 50.0, 100.0)
    recipes = [r for s in ("config", "multiturn") for r in suites.build_recipes(s, lengths, depths, 4, 5)]
    cases = await Calibrator(tokenizer).calibrate(recipes)
    assert [case.id for case in cases] == [recipe_id(recipe) for recipe in recipes]  # ids kept
    layouts = {case.params["layout"] for case in cases if case.not_applicable is None}
    assert {"compact", "minimal", "terse"} <= layouts
    for recipe, case in zip(recipes, cases, strict=True):
        if case.target_tokens == 338 or case.not_applicable is None:
            assert case.not_applicable is None, case.not_applicable
            # within tolerance, or one lumpy filler unit (a config block, a dialogue exchange) off it
            assert abs(case.prompt_tokens - case.target_tokens) <= 40, (case.id, case.prompt_tokens)
            assert case.expected[0] in case.messages[case.needle.message_index].content
            assert all(d in "".join(m.content for m in case.messages) for d in case.distractors)
        else:  # even the smallest form is too long, and was measured as such
            smallest = recipe
            while smallest.smaller() is not None:
                smallest = smallest.smaller()
            assert case.params["layout"] == smallest.layout
            assert case.prompt_tokens == await tokenizer.count_messages(smallest.render(0).messages)
    assert any(case.not_applicable for case in cases if case.target_tokens == 100)


async def test_tiktoken_counts_template_overhead(tokenizer):
    from recall_eval.types import ChatMessage

    one = (ChatMessage(role="user", content="hello"),)
    assert await tokenizer.count_messages(one) == 3 + 1 + 1 + 3


async def test_lumpy_filler_lands_on_the_nearest_size_instead_of_failing(tokenizer):
    """Config filler grows by whole entries, and an entry that opens a block brings its headers (a
    Kubernetes manifest: 8 lines). Where one more entry jumps over the whole window, calibration must
    not abort the sweep: it keeps the filler size nearest to the target."""
    lengths = tuple(range(1000, 1400, 23))
    recipes = suites.build_recipes("config", lengths, (0.0, 50.0, 100.0), 2, 3)
    cases = await Calibrator(tokenizer).calibrate(recipes)
    off_window = 0
    for recipe, case in zip(recipes, cases, strict=True):
        error = abs(case.prompt_tokens - case.target_tokens)
        if error <= tolerance(case.target_tokens):
            continue
        off_window += 1
        words = case.params["filler_words"]
        for neighbour in (words - 1, words + 1):
            tokens = await tokenizer.count_messages(recipe.render(neighbour).messages)
            assert abs(tokens - case.target_tokens) >= error, (case.id, words, neighbour)
    assert off_window < len(cases) // 4  # most cases still sit inside the window


class _ContextLimited(TiktokenTokenizer):
    """tiktoken counts, but a prompt over `limit` tokens is refused, as a server with that context does."""

    name = "test:context-limited"

    def __init__(self, limit: int):
        super().__init__()
        self.limit = limit

    async def tokenize_messages(self, messages):
        tokens = self._tokens(messages)
        if len(tokens) > self.limit:
            raise PromptRefused(
                f"HTTP 400: The input ({len(tokens)} tokens) is longer than the model's context length"
            )
        return tokens


class _Constant(TiktokenTokenizer):
    """A gateway's usage: the same count whatever the prompt."""

    name = "test:constant"

    async def tokenize_messages(self, messages):
        return [0] * 4242


async def test_a_refused_size_bounds_the_search_and_an_unfittable_case_is_too_long():
    """Sizes the server refuses are upper bounds: a target inside the context still lands within
    tolerance (the first guess may overshoot into a refusal); a target beyond it is marked too_long."""
    recipes = _recipes(lengths=(1350, 5391), depths=(50.0,))
    cases = await Calibrator(_ContextLimited(limit=1400)).calibrate(recipes)
    fits, beyond = cases
    assert fits.too_long is None and abs(fits.prompt_tokens - 1350) <= tolerance(1350)
    assert beyond.too_long is not None and "longer than its context" in beyond.too_long


async def test_counts_that_do_not_follow_the_prompt_are_not_trusted():
    with pytest.raises(UntrustedCounts, match="counted 4242 tokens"):
        await Calibrator(_Constant()).calibrate(_recipes(lengths=(1350,), depths=(50.0,)))
