from __future__ import annotations

from itertools import pairwise

import pytest
import tiktoken

from recall_eval.types import Case, CaseRecipe
from suites.dialogue import INTROS, OPENERS
from suites.multi_turn import ORDINALS, VARIANTS, MultiTurnParams, MultiTurnRecipe, multi_turn_recipes
from suites.values import CODE_RE, code_words

MANY = MultiTurnParams(lengths=(1000, 8000), depths=(0, 10, 30, 50, 70, 90, 100), trials=24, seed=5)


@pytest.fixture(scope="module")
def recipes() -> list[MultiTurnRecipe]:
    return multi_turn_recipes(MANY)


def _filler_words_before(case: Case, message_index: int) -> int:
    """Filler words in the messages before `message_index` (intros and openers are not filler)."""
    total = 0
    for message in case.messages[:message_index]:
        for lead in (*INTROS, *OPENERS):
            if message.content.startswith(lead):
                total += len(message.content.split()) - len(lead.split())
                break
    return total


def test_protocol_variants_and_floors(recipes: list[MultiTurnRecipe]) -> None:
    assert len(recipes) == 2 * 7 * 24 and all(isinstance(r, CaseRecipe) for r in recipes)
    for recipe in recipes:
        case = recipe.render(50)
        assert case.params["variant"] == VARIANTS[recipe.trial % 4]
        n = case.params["n_candidates"]
        assert n == 1 + len(case.distractors) and case.params["guess_floor"] == pytest.approx(1 / n)
        if case.params["variant"].startswith("facts="):
            assert n == int(case.params["variant"].removeprefix("facts="))
        else:
            assert n in (3, 4)


def test_deterministic_and_ids_stable(recipes: list[MultiTurnRecipe]) -> None:
    again = multi_turn_recipes(MANY)
    assert [r.render(500) for r in recipes[:40]] == [r.render(500) for r in again[:40]]
    ids = [r.id for r in recipes]
    assert len(set(ids)) == len(ids)
    assert all(r.render(0).id == r.render(3000).id == r.id for r in recipes[:20])


@pytest.mark.parametrize("terse", [False, True])
@pytest.mark.parametrize("filler_words", [0, 1, 400, 3000])
def test_exactly_one_correct_answer(recipes: list[MultiTurnRecipe], filler_words: int, terse: bool) -> None:
    for full in recipes:  # 336 cases
        recipe = full.smaller() if terse else full
        assert recipe is not None and recipe.id == full.id
        case = recipe.render(filler_words)
        assert case.params["layout"] == ("terse" if terse else "full")
        roles = [m.role for m in case.messages]
        assert roles[0] == roles[-1] == "user"
        assert all(a != b for a, b in pairwise(roles)), "roles must alternate"
        assert all(m.content.strip() for m in case.messages)
        everything = "\n".join(m.content for m in case.messages)
        value = case.expected[0]
        assert everything.count(value) == 1
        span = case.needle
        assert case.messages[span.message_index].content[span.char_start : span.char_end] == value
        assert span.message_index < len(case.messages) - 1
        for distractor in case.distractors:
            assert distractor not in value and value not in distractor
            assert everything.count(distractor) == 1
        assert sorted(CODE_RE.findall(everything)) == sorted((value, *case.distractors))
        assert recipe.plan.key in case.messages[-1].content


def test_kth_question_matches_the_mention_order(recipes: list[MultiTurnRecipe]) -> None:
    kth = [r for r in recipes if r.plan.variant == "kth"]
    assert kth
    for recipe in kth:
        case = recipe.render(800)
        mentions = [
            m.content for m in case.messages[:-1] if m.role == "user" and recipe.plan.key in m.content
        ]
        asked = next(i for i, m in enumerate(mentions) if case.expected[0] in m)
        assert ORDINALS[asked] in case.messages[-1].content
        assert len(mentions) == case.params["n_candidates"]


def test_fact_sits_at_the_requested_depth(recipes: list[MultiTurnRecipe]) -> None:
    for recipe in recipes[::5]:
        filler_words = 3000
        case = recipe.render(filler_words)
        before = _filler_words_before(case, case.needle.message_index)
        assert before == case.params["fact_word_index"]
        assert abs(before - recipe.depth_percent / 100 * filler_words) <= 120  # one exchange at most
        if recipe.depth_percent == 100:
            assert before == filler_words


def test_render_is_monotone(recipes: list[MultiTurnRecipe], encoder: tiktoken.Encoding) -> None:
    for recipe in recipes[:8]:
        sizes = [*range(0, 250), 2000, 2001, 2002, 10000, 40000]
        chats = ["\n".join(f"<{m.role}>{m.content}" for m in recipe.render(n).messages) for n in sizes]
        assert all(len(b) > len(a) for a, b in pairwise(chats))
        tokens = [len(encoder.encode(chat)) for chat in chats]
        assert all(b >= a for a, b in pairwise(tokens))


def test_words_guess_lands_near_the_target(encoder: tiktoken.Encoding) -> None:
    for recipe in multi_turn_recipes(MultiTurnParams(lengths=(2000, 16000), depths=(50,), trials=4, seed=0)):
        guess = recipe.words_guess(1.3)
        chat = recipe.render(guess).messages
        tokens = sum(len(encoder.encode(m.content)) + 6 for m in chat)
        assert 0.8 * recipe.target_tokens < tokens < 1.2 * recipe.target_tokens, tokens


def test_train_pool_stays_in_the_train_pool() -> None:
    params = MultiTurnParams(lengths=(1000,), depths=(0, 50, 100), trials=8, seed=0, pool="train")
    for recipe in multi_turn_recipes(params):
        case = recipe.render(200)
        for value in (*case.expected, *case.distractors):
            assert value.split("-")[0] in code_words("train")


def test_terse_form_is_shorter_and_keeps_who_stated_the_fact(
    recipes: list[MultiTurnRecipe], encoder: tiktoken.Encoding
) -> None:
    for full in recipes[::7]:
        terse = full.smaller()
        assert terse is not None and terse.smaller() is None
        a, b = full.render(0), terse.render(0)
        assert (a.expected, a.distractors, a.messages[-1]) == (b.expected, b.distractors, b.messages[-1])
        assert a.params["stated_by"] == b.params["stated_by"]

        def size(case: Case) -> int:
            return sum(len(encoder.encode(m.content)) for m in case.messages)

        assert size(b) < size(a)
