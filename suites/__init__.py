"""Case generators ("suites"): pure, seeded builders of CaseRecipes, registered in suites.registry.

Each suite module registers its suites on import (`@REGISTRY.suite(...)`, `REGISTRY.add(Suite(...))`);
the forms (prepared files, no-context baselines) register the same way, file forms first so that a file
path ending in `~nocontext` stays a file. Installed packages add suites through the `recall_eval.suites`
entry points (suites.registry). The functions below are what the library layer calls.
"""

from __future__ import annotations

from collections.abc import Sequence

from recall_eval import reuse
from recall_eval.types import CaseRecipe
from suites.registry import REGISTRY, Suite, SuiteBuilder

# isort: off
# imported for their registrations, in this order: the order of `--help`, and file forms before ~nocontext
from suites import needle, config_recall, multi_turn, ruler, mrcr  # noqa: F401
from suites import jsonl_files, no_context  # noqa: F401

# isort: on

__all__ = [
    "REGISTRY",
    "Suite",
    "SuiteBuilder",
    "build_recipes",
    "has_case_budgets",
    "known_names",
    "parse_suite_names",
    "reuse_key",
    "suite_version",
]


def known_names() -> tuple[str, ...]:
    """What --suite accepts, for help and error lines: suites, families, the forms."""
    return REGISTRY.known_names()


def parse_suite_names(spec: str, option: str = "--suite") -> tuple[str, ...]:
    """A comma list of suites, families (expanded in place) and forms (file suites: paths made absolute)."""
    return REGISTRY.parse(spec, option)


def build_recipes(
    suite: str, lengths: Sequence[int], depths: Sequence[float], trials: int, seed: int
) -> list[CaseRecipe]:
    """Recipes of one suite over the grid (evaluation pools). Unknown suite: BadInput."""
    return REGISTRY.recipes(suite, lengths, depths, trials, seed)


def has_case_budgets(names: Sequence[str]) -> bool:
    """Whether any of these suites' cases carry their own answer budget (Case.max_tokens: RULER's tasks,
    mrcr, a RULER prepared file, a generic file's row that names one); such a run without --max-tokens
    sends each case with its own budget. A registered suite says so (Suite.budget); a form's cases are
    looked at."""
    for name in names:
        if REGISTRY.form_of(name) is None:
            if REGISTRY.get(name).budget is not None:
                return True
        elif any(r.render(0).max_tokens is not None for r in build_recipes(name, (4096,), (50.0,), 1, 0)):
            return True
    return False


def suite_version(suite: str) -> int:
    """The suite's VERSION (in its module): bumped with any change to what it renders."""
    return REGISTRY.version(suite)


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
    versions = {suite: suite_version(suite) for suite in suites}
    return reuse.reuse_key(package_version, versions, reuse.prompt_digest(recipes))
