"""Case generators ("suites"): pure, seeded builders of CaseRecipes.

build_recipes(suite, lengths, depths, trials, seed) is the one entry point the CLI needs;
reuse_key(...) is what a run records so that only runs of the same prompts are reused or compared.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from recall_eval import reuse
from recall_eval.errors import BadInput
from recall_eval.types import CaseRecipe
from suites import config_recall, multi_turn, needle
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


# Each suite's VERSION (in its module): bumped with any change to what it renders.
SUITE_VERSIONS: dict[str, int] = {
    needle.SUITE: needle.VERSION,
    config_recall.SUITE: config_recall.VERSION,
    multi_turn.SUITE: multi_turn.VERSION,
}


def reuse_key(
    package_version: str,
    suites: Sequence[str],
    lengths: Sequence[int],
    depths: Sequence[float],
    trials: int,
    seed: int,
) -> dict[str, str]:
    """The reuse key of a grid (recall_eval.reuse): versions of the package and suites, and a digest of
    every case rendered at a fixed filler size."""
    recipes = [recipe for suite in suites for recipe in build_recipes(suite, lengths, depths, trials, seed)]
    versions = {suite: SUITE_VERSIONS[suite] for suite in suites}
    return reuse.reuse_key(package_version, versions, reuse.prompt_digest(recipes))
