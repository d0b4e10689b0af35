"""The (length x depth x trial) grid every suite expands, with input checks shared by all suites."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from recall_eval.errors import BadInput

# Evaluation seeds live below this; the training corpus adds it to its seeds (see training_corpus.py).
MAX_EVAL_SEED = 10**9


@dataclass(frozen=True)
class GridCell:
    target_tokens: int
    depth_percent: float
    trial: int


def check_grid(lengths: Sequence[int], depths: Sequence[float], trials: int, seed: int) -> None:
    """Raise BadInput (one line: what, why, what to do) for a grid no suite can build."""
    if not lengths:
        raise BadInput("no context lengths given; pass at least one, e.g. --lengths 1000,4000")
    bad_lengths = [n for n in lengths if not isinstance(n, int) or n < 1]
    if bad_lengths:
        raise BadInput(f"context lengths must be positive integers (tokens), got {bad_lengths}")
    if not depths:
        raise BadInput("no depths given; pass at least one percentage, e.g. --depths 0,50,100")
    bad_depths = [d for d in depths if not 0 <= d <= 100]
    if bad_depths:
        raise BadInput(f"depths are percentages between 0 and 100, got {bad_depths}")
    if trials < 1:
        raise BadInput(f"trials must be at least 1, got {trials}")
    if not 0 <= seed < MAX_EVAL_SEED:
        raise BadInput(
            f"seed must be in [0, {MAX_EVAL_SEED}) (larger seeds are kept for training data), got {seed}"
        )


def grid_cells(lengths: Sequence[int], depths: Sequence[float], trials: int) -> Iterator[GridCell]:
    """Cells in a fixed order: length, then depth, then trial."""
    for length in lengths:
        for depth in depths:
            for trial in range(trials):
                yield GridCell(int(length), float(depth), trial)
