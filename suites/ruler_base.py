"""What RULER's synthetic tasks share here: the recipe base, the value kinds, the noise haystack.

RULER (NVIDIA, arXiv 2404.06654; github NVIDIA/RULER scripts/synthetic.yaml) defines 13 tasks; the
ones built here follow its definitions (haystack kinds, key and value types, counts, answer budgets,
scorers) with this project's own wording and word lists. A task whose RULER haystack is the Paul
Graham essays (a download) uses this project's offline filler instead and carries `~filler` in its
name, so its scores are never mistaken for RULER's own.

Every recipe renders ONE user message: RULER's prompt as its `base` template sends it (instruction,
context, question, then the answer prefix the model continues). `render(filler_words)` sizes the
haystack in filler words; tasks whose haystack is made of units (noise lines, distractor needles,
numbered words) turn words into units by a fixed words-per-unit ratio, so calibration's
tokens-per-word ratio stays meaningful and the prompt grows with filler_words.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar, Generic, TypeVar

from recall_eval.types import Case, ChatMessage, NeedleSpan
from suites import lexicon as lx
from suites.seeding import stable_id
from suites.values import Pool

VERSION = 1  # bump with any change to what a RULER task renders
FAMILY = "ruler"
FILLER_SUFFIX = "~filler"  # the task's essay haystack is replaced by this project's filler prose
CHAT_OVERHEAD_TOKENS = 12
# RULER's answer budgets (tokens_to_generate in its scripts/data/synthetic/constants.py), by task kind;
# each task class carries its own as TOKENS_TO_GENERATE, prepared files take theirs from here
RULER_BUDGETS = {"niah": 128, "vt": 30, "cwe": 120, "fwe": 50, "qa": 32}


def ruler_budget(task: str) -> int | None:
    """RULER's answer budget for a task name (niah_single_1, vt, qa_2, ...); None for another name."""
    kind = next((kind for kind in RULER_BUDGETS if task.startswith(kind)), None)
    return RULER_BUDGETS[kind] if kind is not None else None


# RULER's noise haystack is one fixed line of plain statements repeated; this is our own line.
NOISE_LINE = "The river is wide. The hill is quiet. The road goes on. Here it comes. Over and back once more."

T = TypeVar("T")


class Stream(Generic[T]):
    """Items made one by one from one seeded rng: item i is the same however many are asked for."""

    def __init__(self, rng: random.Random, make: Callable[[random.Random], T]):
        self._rng, self._make, self._items = rng, make, []

    def take(self, n: int) -> list[T]:
        while len(self._items) < n:
            self._items.append(self._make(self._rng))
        return self._items[:n]


def number_value(rng: random.Random) -> str:
    """A 7-digit number (RULER's `numbers`)."""
    return str(rng.randint(10**6, 10**7 - 1))


def uuid_value(rng: random.Random) -> str:
    """A random version-4 UUID (RULER's `uuids`)."""
    return str(uuid.UUID(int=rng.getrandbits(128), version=4))


def word_key(rng: random.Random) -> str:
    """An adjective-noun pair such as `quiet-lantern` (RULER's `words`: wonderwords adjective-noun)."""
    return f"{rng.choice(lx.QUALITIES + lx.CHARACTER)}-{rng.choice(lx.THINGS)}"


VALUE_KINDS: dict[str, Callable[[random.Random], str]] = {
    "numbers": number_value,
    "uuids": uuid_value,
    "words": word_key,
}
SINGULAR = {"numbers": "number", "uuids": "uuid", "words": "word"}


def positions(fractions: list[float], units: int) -> list[int]:
    """Insert positions in [0, units] for fixed fractions: they scale with the haystack."""
    return [min(units, round(f * units)) for f in fractions]


@dataclass(frozen=True)
class RulerRecipe:
    """Base of the RULER task recipes (recall_eval.types.CaseRecipe). A subclass renders its prompt."""

    TOKENS_TO_GENERATE: ClassVar[
        int
    ]  # RULER's answer budget for the task (Case.max_tokens; --max-tokens rules)
    WORDS_PER_UNIT: ClassVar[int] = 1

    suite: str  # the task's name, e.g. niah_single_1, niah_single_2~filler, vt
    target_tokens: int
    depth_percent: float
    trial: int
    seed: int
    pool: Pool
    rng_seed: int = field(repr=False)  # the case's own random stream (from its cell)

    @property
    def id(self) -> str:
        return stable_id(
            FAMILY,
            self.suite,
            VERSION,
            self.pool,
            self.seed,
            self.trial,
            self.target_tokens,
            self.depth_percent,
        )

    def rng(self, *parts: Any) -> random.Random:
        return random.Random(stable_id(self.rng_seed, *parts))

    def units(self, filler_words: int) -> int:
        return max(0, filler_words) // self.WORDS_PER_UNIT

    def make_case(
        self,
        content: str,
        expected: list[str],
        params: dict[str, Any],
        filler_words: int,
        needle_at: int | None = None,
        needle_len: int = 0,
    ) -> Case:
        needle = None
        if needle_at is not None:
            needle = NeedleSpan(message_index=0, char_start=needle_at, char_end=needle_at + needle_len)
        return Case(
            id=self.id,
            suite=self.suite,
            messages=(ChatMessage(role="user", content=content),),
            expected=tuple(expected),
            needle=needle,
            target_tokens=self.target_tokens,
            depth_percent=self.depth_percent,
            trial=self.trial,
            seed=self.seed,
            metric="string_match_all",
            max_tokens=self.TOKENS_TO_GENERATE,
            params={
                "version": VERSION,
                "pool": self.pool,
                "family": FAMILY,
                "task": self.suite,
                "metric": "string_match_all",
                "filler_words": max(0, filler_words),
                "ruler_tokens_to_generate": self.TOKENS_TO_GENERATE,
                **params,
            },
        )

    def fixed_chars(self) -> int:
        """Characters of the prompt with no haystack (for the first guess only)."""
        return len(self.render(0).messages[0].content)

    def words_guess(self, tokens_per_word: float) -> int:
        fixed_tokens = self.fixed_chars() / 4 + CHAT_OVERHEAD_TOKENS
        return max(0, round((self.target_tokens - fixed_tokens) / max(tokens_per_word, 1e-6)))

    def render(self, filler_words: int, bare: bool = False) -> Case:  # pragma: no cover - subclasses render
        raise NotImplementedError

    def bare_case(self) -> Case:
        """The no-context baseline: the task's prompt with an empty context (worked examples kept)."""
        return self.render(0, bare=True)
