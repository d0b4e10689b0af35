"""A third-party suite package as a user would write one (installed by tests/suites/plugin/__init__.py
into a temp folder with its own entry-points metadata): one pass/miss suite, `colors`, whose question
sits after its filler, and one scored suite, `colors_scored`, graded by RULER's string_match_all."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass

from recall_eval.types import Case, ChatMessage
from suites.registry import Suite

FILLER = "The river runs past the old mill and the fields are quiet in the evening. "


@dataclass(frozen=True)
class ColorRecipe:
    suite: str
    target_tokens: int
    depth_percent: float
    trial: int
    seed: int
    metric: str | None = None

    def render(self, filler_words: int) -> Case:
        words = FILLER.split()
        filler = " ".join(words[i % len(words)] for i in range(filler_words))
        color = ("violet", "amber", "teal")[(self.trial + self.seed) % 3]
        text = (
            f"The color of the door is {color}. {filler}\nWhat is the color of the door? Answer in one word."
        )
        key = f"{self.suite}|{self.target_tokens}|{self.depth_percent}|{self.trial}|{self.seed}"
        return Case(
            id=hashlib.sha256(key.encode()).hexdigest()[:16],
            suite=self.suite,
            messages=(ChatMessage(role="user", content=text),),
            expected=(color,),
            target_tokens=self.target_tokens,
            depth_percent=self.depth_percent,
            trial=self.trial,
            seed=self.seed,
            metric=self.metric,
            params={"metric": self.metric} if self.metric else {},
        )

    def words_guess(self, tokens_per_word: float) -> int:
        return max(0, round((self.target_tokens - 30) / max(tokens_per_word, 1e-6)))


def _builder(name: str, metric: str | None):
    def build(lengths: Sequence[int], depths: Sequence[float], trials: int, seed: int) -> list[ColorRecipe]:
        return [
            ColorRecipe(name, length, depth, trial, seed, metric)
            for length in lengths
            for depth in depths
            for trial in range(trials)
        ]

    return build


SUITES = [
    Suite("colors", _builder("colors", None), version=3, family="colors_family"),
    Suite("colors_scored", _builder("colors_scored", "string_match_all"), version=3, family="colors_family",
          scorer="string_match_all"),
]  # fmt: skip


def broken(registry: object) -> None:
    raise RuntimeError("this plugin cannot register")
