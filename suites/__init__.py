"""Case generators ("suites"): pure, seeded builders of CaseRecipes.

build_recipes(suite, lengths, depths, trials, seed) is the one entry point the CLI needs.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from recall_eval.errors import BadInput
from recall_eval.types import CaseRecipe
from suites.config_recall import ConfigParams, config_recipes
from suites.multi_turn import MultiTurnParams, multi_turn_recipes
from suites.needle import NeedleParams, needle_recipes

SuiteBuilder = Callable[[Sequence[int], Sequence[float], int, int], list[CaseRecipe]]


def _needle(lengths: Sequence[int], depths: Sequence[float], trials: int, seed: int) -> list[CaseRecipe]:
    return list(needle_recipes(NeedleParams(lengths=lengths, depths=depths, trials=trials, seed=seed)))


def _config(lengths: Sequence[int], depths: Sequence[float], trials: int, seed: int) -> list[CaseRecipe]:
    return list(config_recipes(ConfigParams(lengths=lengths, depths=depths, trials=trials, seed=seed)))


def _multi_turn(lengths: Sequence[int], depths: Sequence[float], trials: int, seed: int) -> list[CaseRecipe]:
    return list(multi_turn_recipes(MultiTurnParams(lengths=lengths, depths=depths, trials=trials, seed=seed)))


SUITES: dict[str, SuiteBuilder] = {
    "needle": _needle,
    "config": _config,
    "multiturn": _multi_turn,
}


def build_recipes(
    suite: str, lengths: Sequence[int], depths: Sequence[float], trials: int, seed: int
) -> list[CaseRecipe]:
    """Recipes of one suite over the grid (evaluation pools). Unknown suite: BadInput."""
    builder = SUITES.get(suite)
    if builder is None:
        known = ", ".join(sorted(SUITES))
        raise BadInput(f"unknown suite {suite!r}; known suites: {known}")
    return builder(lengths, depths, trials, seed)
