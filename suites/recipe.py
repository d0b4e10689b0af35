"""What every suite's recipe shares: its grid cell, seed and value pool, the case id and the common case fields."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from recall_eval.types import Case
from suites.seeding import stable_id
from suites.values import Pool


@dataclass(frozen=True)
class GridRecipe:
    """Base of the suites' recipes; a subclass sets SUITE and VERSION and adds what it renders from."""

    SUITE: ClassVar[str]
    VERSION: ClassVar[int]  # in every id and case: bumping it keeps old results from being resumed

    target_tokens: int
    depth_percent: float
    trial: int
    seed: int
    pool: Pool

    def cell_parts(self) -> tuple[Any, ...]:
        """The parts the id hashes; they must never change (resume and paired comparisons rely on ids)."""
        return (
            self.SUITE,
            self.VERSION,
            self.pool,
            self.seed,
            self.trial,
            self.target_tokens,
            self.depth_percent,
        )

    @property
    def id(self) -> str:
        return stable_id(*self.cell_parts())

    def make_case(self, params: dict[str, Any], **fields: Any) -> Case:
        """A Case of this cell: fields are the suite's own (messages, expected, needle, ...);
        params start with version and pool."""
        return Case(
            id=self.id,
            suite=self.SUITE,
            target_tokens=self.target_tokens,
            depth_percent=self.depth_percent,
            trial=self.trial,
            seed=self.seed,
            params={"version": self.VERSION, "pool": self.pool, **params},
            **fields,
        )
