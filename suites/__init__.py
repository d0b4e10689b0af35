"""Case generators ("suites"): pure, seeded builders of CaseRecipes.

build_recipes(suite, lengths, depths, trials, seed) is the one entry point the CLI needs;
reuse_key(...) is what a run records so that only runs of the same prompts are reused or compared.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from recall_eval import reuse
from recall_eval.errors import BadInput
from recall_eval.types import CaseRecipe
from suites import config_recall, jsonl_files, mrcr, multi_turn, needle, no_context, ruler, ruler_base
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


def _ruler_task(task: str) -> SuiteBuilder:
    return lambda lengths, depths, trials, seed: list(
        ruler.ruler_recipes(task, lengths, depths, trials, seed)
    )


def _mrcr(needles: int) -> SuiteBuilder:
    return lambda lengths, depths, trials, seed: list(
        mrcr.mrcr_recipes(needles, lengths, depths, trials, seed)
    )


SUITES: dict[str, SuiteBuilder] = {
    "needle": _needle,
    "config": _config,
    "multiturn": _multi_turn,
    **{task: _ruler_task(task) for task in ruler.TASKS},
    **{f"{mrcr.FAMILY}_{n}": _mrcr(n) for n in mrcr.NEEDLE_COUNTS},
}
# a family name selects its suites in this order
FAMILIES: dict[str, tuple[str, ...]] = {
    ruler_base.FAMILY: ruler.TASKS,
    mrcr.FAMILY: tuple(f"{mrcr.FAMILY}_{n}" for n in mrcr.NEEDLE_COUNTS),
}
FILE_SUITE_FORMS = ("ruler-jsonl:PATH", "jsonl:PATH")


def known_names() -> tuple[str, ...]:
    """What --suite accepts, for help and error lines: suites, families, the file forms."""
    return (*SUITES, *FAMILIES, *FILE_SUITE_FORMS, "SUITE~nocontext")


def parse_suite_names(spec: str, option: str = "--suite") -> tuple[str, ...]:
    """A comma list of suites, families (expanded in place) and file suites (paths made absolute)."""
    names: list[str] = []
    for item in (part.strip() for part in spec.split(",")):
        if not item:
            raise BadInput(
                f"{option} {spec!r}: write comma-separated suite names ({', '.join(known_names())})"
            )
        if item.endswith(no_context.SUFFIX) and not jsonl_files.is_file_suite(item):
            base = item.removesuffix(no_context.SUFFIX)
            inner = parse_suite_names(base, option)
            lacking = [name for name in inner if not _has_baseline(name)]
            if lacking:
                raise BadInput(
                    f"{option} {spec!r}: {', '.join(lacking)} has no no-context form (suites with one: "
                    f"needle, the RULER tasks, mrcr)"
                )
            names.extend(name + no_context.SUFFIX for name in inner)
        elif jsonl_files.is_file_suite(item):
            for file_suite in jsonl_files.expand_spec(item):  # a folder: every .jsonl under it
                jsonl_files.file_recipes(file_suite)  # a missing or malformed file is refused now
                names.append(file_suite)
        elif item in FAMILIES:
            names.extend(FAMILIES[item])
        elif item in SUITES:
            names.append(item)
        else:
            if f"{item}{ruler_base.FILLER_SUFFIX}" in SUITES:
                hint = f"; RULER's essay haystack is replaced here: use {item}{ruler_base.FILLER_SUFFIX}"
            else:
                hint = f" (known: {', '.join(known_names())})"
            raise BadInput(f"{option} {spec!r}: unknown suite {item!r}" + hint)
    if len(set(names)) != len(names):
        raise BadInput(f"{option} {spec!r}: a suite is repeated (a family already holds its suites)")
    return tuple(names)


def has_case_budgets(names: Sequence[str]) -> bool:
    """Whether any of these suites' cases carry their own answer budget (Case.max_tokens: RULER's tasks,
    mrcr, a RULER prepared file, a generic file's row that names one); such a run without --max-tokens
    sends each case with its own budget."""
    for name in names:
        recipes = build_recipes(name, (4096,), (50.0,), 1, 0)
        if any(recipe.render(0).max_tokens is not None for recipe in recipes):
            return True
    return False


def _has_baseline(name: str) -> bool:
    return not jsonl_files.is_file_suite(name) and all(
        no_context.has_baseline(recipe) for recipe in SUITES[name]((4096,), (50.0,), 1, 0)
    )


def build_recipes(
    suite: str, lengths: Sequence[int], depths: Sequence[float], trials: int, seed: int
) -> list[CaseRecipe]:
    """Recipes of one suite over the grid (evaluation pools). Unknown suite: BadInput."""
    if jsonl_files.is_file_suite(suite):  # a prepared file: its rows, whatever the grid
        return list(jsonl_files.file_recipes(suite))
    if suite.endswith(no_context.SUFFIX):  # the suite's questions without their haystacks
        inner = build_recipes(suite.removesuffix(no_context.SUFFIX), lengths, depths, trials, seed)
        return [no_context.NoContextRecipe(recipe) for recipe in inner]
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
    **{task: ruler_base.VERSION for task in ruler.TASKS},
    **{f"{mrcr.FAMILY}_{n}": mrcr.VERSION for n in mrcr.NEEDLE_COUNTS},
}


def suite_version(suite: str) -> int:
    if jsonl_files.is_file_suite(suite):
        return jsonl_files.VERSION
    return SUITE_VERSIONS[suite.removesuffix(no_context.SUFFIX)]


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
