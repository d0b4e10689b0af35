"""RULER's synthetic tasks as suites: one suite per task, `ruler` selecting them all.

Each task builds one case per (length, depth, trial) cell. Tasks with a needle put its first answer
at the cell's depth; vt, cwe and fwe have none and sit at depth 0 (one case per cell all the same, so
every task has the same number of samples). Values come from the case's own seeded stream.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

from suites.filler import FillerText
from suites.grid import check_grid, grid_cells
from suites.registry import REGISTRY, Suite
from suites.ruler_base import FAMILY, VERSION, RulerRecipe, ruler_budget
from suites.ruler_niah import NIAH_TASKS, make_niah_recipe
from suites.ruler_tasks import CweRecipe, FweRecipe, VtRecipe, fwe_vocab
from suites.seeding import derive_rng

# RULER's effective-length threshold: Llama-2-7B's mean score at 4K (85.6 of 100).
RULER_THRESHOLD = 0.856
DEPTHLESS = ("vt", "cwe", "fwe")
TASKS: tuple[str, ...] = (*NIAH_TASKS, *DEPTHLESS)


def ruler_recipes(
    task: str, lengths: Sequence[int], depths: Sequence[float], trials: int, seed: int
) -> list[RulerRecipe]:
    """One recipe per cell of one RULER task (see TASKS)."""
    check_grid(lengths, depths, trials, seed)
    fillers: dict[int, FillerText] = {}
    recipes: list[RulerRecipe] = []
    for index, cell in enumerate(grid_cells(lengths, depths, trials)):
        depth = 0.0 if task in DEPTHLESS else cell.depth_percent
        # depth-less tasks: one sample per cell all the same; the cell's index keeps them apart
        trial = cell.trial if task not in DEPTHLESS else index % (len(depths) * trials)
        base = {
            "target_tokens": cell.target_tokens,
            "depth_percent": depth,
            "trial": trial,
            "seed": seed,
            "pool": "eval",
            "rng_seed": derive_rng(FAMILY, task, VERSION, seed, trial, cell.target_tokens, depth).getrandbits(
                64
            ),
        }
        if task in NIAH_TASKS:
            filler = fillers.setdefault(cell.trial, FillerText(f"{FAMILY}:{seed}:{cell.trial}"))
            recipes.append(make_niah_recipe(task, base, filler))
        elif task == "vt":
            recipes.append(VtRecipe(suite=task, **base))
        elif task == "cwe":
            recipes.append(CweRecipe(suite=task, **base))
        elif task == "fwe":
            vocab = fwe_vocab(
                derive_rng(FAMILY, "fwe-vocab", seed, trial, cell.target_tokens), cell.target_tokens
            )
            recipes.append(FweRecipe(suite=task, vocab=vocab, **base))
        else:
            raise KeyError(task)
    return recipes


for _task in TASKS:  # `ruler` selects them in this order; each is graded as RULER grades it
    REGISTRY.add(
        Suite(
            _task,
            functools.partial(ruler_recipes, _task),
            VERSION,
            family=FAMILY,
            budget=ruler_budget(_task),
            scorer="string_match_all",
            no_context=True,
        )
    )
