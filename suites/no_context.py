"""No-context baselines: a suite's questions asked without their haystack (`--suite SUITE~nocontext`).

A model that answers right with nothing to read is guessing (or knew the answer): the baseline exposes
answers a suite gives away. Each baseline case is its suite case's `bare_case()` (the question, answer
prefix and any worked example, with no haystack and no needle), sent as it is (calibration only measures
it), scored like the suite's own cases, under the suite name `<suite>~nocontext` with its own case id.
Its target length stays the cell's, so the baseline lines up with the suite in the reports' length
columns; its depth is 0 (there is nothing to place).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from recall_eval.errors import BadInput
from recall_eval.types import NO_CONTEXT_SUFFIX, Case, CaseRecipe
from suites.registry import REGISTRY, Registry
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


class NoContextForm:
    """`SUITE~nocontext` in --suite (SUITE may be a family): the baselines of suites registered with one."""

    pattern = f"SUITE{SUFFIX}"

    def claims(self, item: str) -> bool:
        return item.endswith(SUFFIX)

    def expand(self, item: str, registry: Registry, option: str) -> list[str]:
        inner = registry.parse(item.removesuffix(SUFFIX), option)
        suites = registry.suites()
        lacking = [name for name in inner if name not in suites or not suites[name].no_context]
        if lacking:
            having = dict.fromkeys(suite.family or name for name, suite in suites.items() if suite.no_context)
            raise BadInput(
                f"{option} {item!r}: {', '.join(lacking)} has no no-context form (suites with one: "
                f"{', '.join(having)})"
            )
        return [name + SUFFIX for name in inner]

    def recipes(
        self,
        name: str,
        registry: Registry,
        lengths: Sequence[int],
        depths: Sequence[float],
        trials: int,
        seed: int,
    ) -> list[CaseRecipe]:
        inner = registry.recipes(name.removesuffix(SUFFIX), lengths, depths, trials, seed)
        return [NoContextRecipe(recipe) for recipe in inner]

    def version(self, name: str, registry: Registry) -> int:
        return registry.version(name.removesuffix(SUFFIX))


REGISTRY.add_form(NoContextForm())
