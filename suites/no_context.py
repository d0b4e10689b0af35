"""No-context baselines: a suite's questions asked without their haystack (`--suite SUITE~nocontext`).

A model that answers right with nothing to read is guessing (or knew the answer): the baseline exposes
answers a suite gives away. Each baseline case is its suite case's `bare_case()` (the question, answer
prefix and any worked example, with no haystack and no needle), sent as it is (calibration only measures
it), scored like the suite's own cases, under the suite name `<suite>~nocontext` with its own case id.
Its target length stays the cell's, so the baseline lines up with the suite in the reports' length
columns; its depth is 0 (there is nothing to place).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from recall_eval.types import NO_CONTEXT_SUFFIX, Case
from suites.seeding import stable_id

SUFFIX = NO_CONTEXT_SUFFIX


def has_baseline(recipe: Any) -> bool:
    return callable(getattr(recipe, "bare_case", None))


@dataclass(frozen=True)
class NoContextRecipe:
    """The baseline form of one suite recipe (recall_eval.types.CaseRecipe; fixed: never resized)."""

    fixed = True
    inner: Any

    @property
    def suite(self) -> str:
        return self.inner.suite + SUFFIX

    @property
    def target_tokens(self) -> int:
        return self.inner.target_tokens

    @property
    def depth_percent(self) -> float:
        return 0.0

    @property
    def trial(self) -> int:
        return self.inner.trial

    @property
    def seed(self) -> int:
        return self.inner.seed

    @property
    def id(self) -> str:
        return stable_id("nocontext", self.inner.render(0).id)

    def render(self, filler_words: int) -> Case:
        del filler_words  # nothing to size
        case = self.inner.bare_case()
        params = {**case.params, "task": self.suite, "baseline_of": self.inner.suite, "grid": "baseline"}
        return case.model_copy(
            update={"id": self.id, "suite": self.suite, "depth_percent": 0.0, "params": params}
        )

    def words_guess(self, tokens_per_word: float) -> int:
        return 0
