"""MRCR-style ordinal coreference (after OpenAI's MRCR), generated offline from templates.

A long chat of user requests ("Write a short poem about lanterns.") and assistant answers (prose from
this project's filler) holds 2, 4 or 8 requests of the SAME kind (form and topic) with different
answers; distractor requests share the form or the topic, or neither. The last user turn asks for the
i-th of those answers, prefixed by a random string. MRCR's grade (recall_eval.metrics.mrcr_score): 0
unless the answer starts with the prefix, else difflib's SequenceMatcher ratio against the true answer.

Suites mrcr_2, mrcr_4 and mrcr_8 (family `mrcr`). The answer asked for sits at the cell's depth of the
chat; the other same-kind requests at random fractions fixed per case, so its ordinal follows from the
order. Each case records its random-guess floor (`param_floor`): the mean grade of answering, with the
right prefix, one of the OTHER same-kind answers; DeepMind's MRCR v2 reports floors of about 51% / 27%
/ 15% for 2 / 4 / 8 needles (their sampling differs). Filler words become distractor exchanges
(WORDS_PER_EXCHANGE words each), so the chat grows with filler_words.
"""

from __future__ import annotations

import functools
import random
import string
from collections.abc import Sequence
from dataclasses import dataclass, field

from recall_eval.metrics import mrcr_score
from recall_eval.types import Case, ChatMessage, NeedleSpan
from suites import lexicon as lx
from suites.filler import make_sentence
from suites.grid import check_grid, grid_cells
from suites.registry import REGISTRY, Suite
from suites.ruler_base import Stream, positions
from suites.seeding import derive_rng, stable_id

FAMILY = "mrcr"
VERSION = 1
NEEDLE_COUNTS = (2, 4, 8)
FORMS = ("short poem", "short story", "riddle", "letter", "song", "diary entry", "speech", "limerick")
WORDS_PER_EXCHANGE = 45
ANSWER_SENTENCES = 2  # each answer is two filler sentences (about 25 words)
ANSWER_BUDGET = 64  # tokens: the 10-character prefix and about 25 words (Case.max_tokens)
PREFIX_CHARS = 10
ORDINALS = ("1st", "2nd", "3rd", "4th", "5th", "6th", "7th", "8th")
QUESTION = (
    "Prepend {prefix} to the {ordinal} (1 indexed) {form} about {topic}. "
    "Do not include any other text in your response."
)


def _request(form: str, topic: str) -> str:
    return f"Write a {form} about {topic}."


def _answer(rng: random.Random) -> str:
    return " ".join(make_sentence(rng) for _ in range(ANSWER_SENTENCES))


def _distractor(form: str, topic: str, rng: random.Random) -> tuple[str, str]:
    """A request of another kind (same form, same topic or neither) and its answer."""
    while True:
        other_form, other_topic = rng.choice(FORMS), rng.choice(lx.THINGS)
        roll = rng.random()
        if roll < 0.35:
            other_form = form  # same form, another topic
        elif roll < 0.7:
            other_topic = topic  # same topic, another form
        if (other_form, other_topic) != (form, topic):
            return _request(other_form, other_topic), _answer(rng)


def random_floor(answers: Sequence[str], asked: int, prefix: str) -> float:
    """Mean grade of answering, with the prefix, one of the other same-kind answers."""
    others = [a for i, a in enumerate(answers) if i != asked]
    truth = prefix + answers[asked]
    return sum(mrcr_score(prefix + a, truth, prefix) for a in others) / len(others) if others else 0.0


@dataclass(frozen=True)
class MrcrRecipe:
    """One MRCR-style case (recall_eval.types.CaseRecipe); filler words size the distractor chat."""

    suite: str
    target_tokens: int
    depth_percent: float
    trial: int
    seed: int
    form: str
    topic: str
    prefix: str
    answers: tuple[str, ...]  # the same-kind answers, in chat order
    asked: int  # index into answers of the one asked for (its ordinal is asked + 1)
    fractions: tuple[float, ...]  # where each same-kind exchange sits in the chat, chat order
    distractors: Stream[tuple[str, str]] = field(repr=False, compare=False)

    @property
    def id(self) -> str:
        return stable_id(
            FAMILY, self.suite, VERSION, self.seed, self.trial, self.target_tokens, self.depth_percent
        )

    def render(self, filler_words: int) -> Case:
        units = max(0, filler_words) // WORDS_PER_EXCHANGE
        exchanges = list(self.distractors.take(units))
        at = positions(list(self.fractions), units)
        for shift, answer in enumerate(self.answers):
            exchanges.insert(at[shift] + shift, (_request(self.form, self.topic), answer))
        messages: list[ChatMessage] = []
        for request, answer in exchanges:
            messages += [
                ChatMessage(role="user", content=request),
                ChatMessage(role="assistant", content=answer),
            ]
        ask = QUESTION.format(
            prefix=self.prefix, ordinal=ORDINALS[self.asked], form=self.form, topic=self.topic
        )
        messages.append(ChatMessage(role="user", content=ask))
        asked_at = next(
            i
            for i, m in enumerate(messages)
            if m.role == "assistant" and m.content == self.answers[self.asked]
        )
        return Case(
            id=self.id,
            suite=self.suite,
            messages=tuple(messages),
            expected=(self.prefix + self.answers[self.asked],),
            needle=NeedleSpan(message_index=asked_at, char_start=0, char_end=len(self.answers[self.asked])),
            target_tokens=self.target_tokens,
            depth_percent=self.depth_percent,
            trial=self.trial,
            seed=self.seed,
            metric="mrcr",
            max_tokens=ANSWER_BUDGET,
            params={
                "version": VERSION,
                "family": FAMILY,
                "task": self.suite,
                "metric": "mrcr",
                "prefix": self.prefix,
                "needles": len(self.answers),
                "ordinal": self.asked + 1,
                "floor": round(random_floor(self.answers, self.asked, self.prefix), 4),
                "exchanges": len(exchanges),
                "filler_words": max(0, filler_words),
            },
        )

    def bare_case(self) -> Case:
        """The no-context baseline: the final question alone (no chat before it)."""
        case = self.render(0)
        return case.model_copy(update={"messages": case.messages[-1:], "needle": None})

    def words_guess(self, tokens_per_word: float) -> int:
        return max(0, round((self.target_tokens - 60 * len(self.answers) - 60) / max(tokens_per_word, 1e-6)))


def mrcr_recipes(
    needles: int, lengths: Sequence[int], depths: Sequence[float], trials: int, seed: int
) -> list[MrcrRecipe]:
    """One recipe per (length, depth, trial) cell of the mrcr_<needles> suite."""
    check_grid(lengths, depths, trials, seed)
    return [
        make_mrcr_recipe(
            needles,
            cell.target_tokens,
            cell.depth_percent,
            cell.trial,
            seed,
            derive_rng(FAMILY, VERSION, needles, seed, cell.trial, cell.target_tokens, cell.depth_percent),
        )
        for cell in grid_cells(lengths, depths, trials)
    ]


def make_mrcr_recipe(
    needles: int, target_tokens: int, depth_percent: float, trial: int, seed: int, rng: random.Random
) -> MrcrRecipe:
    """One mrcr_<needles> case drawn from `rng` (the suite's cells, and the training corpus's documents)."""
    form, topic = rng.choice(FORMS), rng.choice(lx.THINGS)
    prefix = "".join(rng.choices(string.ascii_letters + string.digits, k=PREFIX_CHARS))
    answers = tuple(_answer(rng) for _ in range(needles))
    fractions = sorted([depth_percent / 100, *(rng.random() for _ in range(needles - 1))])
    asked = fractions.index(depth_percent / 100)
    stream_rng = random.Random(rng.getrandbits(64))
    return MrcrRecipe(
        suite=f"{FAMILY}_{needles}",
        target_tokens=target_tokens,
        depth_percent=depth_percent,
        trial=trial,
        seed=seed,
        form=form,
        topic=topic,
        prefix=prefix,
        answers=answers,
        asked=asked,
        fractions=tuple(fractions),
        distractors=Stream(stream_rng, lambda r, f=form, t=topic: _distractor(f, t, r)),
    )


for _needles in NEEDLE_COUNTS:  # `mrcr` selects mrcr_2, mrcr_4, mrcr_8
    REGISTRY.add(
        Suite(
            f"{FAMILY}_{_needles}",
            functools.partial(mrcr_recipes, _needles),
            VERSION,
            family=FAMILY,
            budget=ANSWER_BUDGET,
            scorer="mrcr",
            no_context=True,
        )
    )
