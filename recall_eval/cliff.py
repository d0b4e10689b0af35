"""The cliff finder's policy (`--lengths search:MIN..MAX[:BUDGET]`): the longest length whose recall stays at
or above the effective-length threshold, by bisection on a log scale with sequential decisions.

At a length, trials are added a batch at a time (--trials per batch) until the 95% Wilson interval of its
recall is clearly above the threshold (its low end above: the length holds) or clearly below (its high end
below: the length falls), or the length's budget of trials is spent (then its point estimate decides, and
the decision is marked as made on the budget). MIN is decided first (if it falls, the cliff is below the
range), then MAX (if it holds, above it); then the bracket [held, fell] is bisected at the geometric mean
until fell / held <= 1 + RESOLUTION (or they are adjacent tokens). Bisection assumes recall falls with
length once (a monotone cliff); a non-monotone server still gets a bracket whose ends were each measured.

The equivalent full grid: geometric lengths from MIN to MAX no further apart than the final bracket, each
at the full budget of trials; its cost is what the search is measured against. Pure: no I/O, no server.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Literal

from recall_eval.errors import BadInput
from recall_eval.stats import EFFECTIVE_RECALL, wilson_interval

SEARCH_PREFIX = "search:"
RESOLUTION = 0.05  # bisect until the bracket's ends are within 5% of each other
DEFAULT_BUDGET = 12  # trials per length, at most
_SPEC = re.compile(r"search:(\d+)\.\.(\d+)(?::(\d+))?")

Decision = Literal["holds", "falls"]


@dataclass(frozen=True)
class LengthSearch:
    low: int  # MIN, in server tokens
    high: int  # MAX
    budget: int  # trials per length at most


def is_search(spec: object) -> bool:
    return isinstance(spec, str) and spec.strip().startswith(SEARCH_PREFIX)


def parse_search(spec: str, option: str = "--lengths") -> LengthSearch:
    match = _SPEC.fullmatch(spec.strip())
    if not match:
        raise BadInput(
            f"{option} {spec!r}: a search is search:MIN..MAX or search:MIN..MAX:BUDGET (trials per length), "
            "e.g. search:1000..64000"
        )
    low, high = int(match[1]), int(match[2])
    budget = int(match[3]) if match[3] else DEFAULT_BUDGET
    if not 0 < low < high:
        raise BadInput(f"{option} {spec!r}: MIN must be at least 1 and below MAX")
    if budget < 1:
        raise BadInput(f"{option} {spec!r}: the budget must be at least 1 trial per length")
    return LengthSearch(low, high, budget)


@dataclass
class Tally:
    """What is known at one length."""

    trials: int = 0
    passes: int = 0
    answered: int = 0
    cases: int = 0
    decision: Decision | None = None
    on_budget: bool = False  # decided by the point estimate when the budget ran out

    @property
    def recall(self) -> float | None:
        return self.passes / self.answered if self.answered else None


@dataclass
class CliffSearch:
    """The search's state; drive it with next_length() / record() until next_length() is None."""

    search: LengthSearch
    batch: int  # trials added per step
    threshold: float = EFFECTIVE_RECALL
    tallies: dict[int, Tally] = field(default_factory=dict)
    order: list[int] = field(default_factory=list)  # lengths in the order they were first tested

    def _decided(self, length: int) -> Decision | None:
        tally = self.tallies.get(length)
        return tally.decision if tally else None

    def next_length(self) -> int | None:
        """The length to add a batch of trials at, or None when the bracket is found."""
        low, high = self.search.low, self.search.high
        for end in (low, high):
            decision = self._decided(end)
            if decision is None:
                return end
            if (end == low and decision == "falls") or (end == high and decision == "holds"):
                return None
        held, fell = self.bracket()
        assert held is not None and fell is not None
        if fell / held <= 1 + RESOLUTION or fell - held <= 1:
            return None
        middle = round(math.sqrt(held * fell))
        return min(max(middle, held + 1), fell - 1)

    def batches_at(self, length: int) -> int:
        tally = self.tallies.get(length)
        return tally.trials // self.batch if tally else 0

    def record(self, length: int, passes: int, answered: int, cases: int) -> None:
        """One batch's outcome at `length` (passes of answered pass/miss cases; cases sent)."""
        tally = self.tallies.setdefault(length, Tally())
        if length not in self.order:
            self.order.append(length)
        tally.trials += self.batch
        tally.passes += passes
        tally.answered += answered
        tally.cases += cases
        interval = wilson_interval(tally.passes, tally.answered)
        if interval is not None and interval[0] > self.threshold:
            tally.decision = "holds"
        elif interval is not None and interval[1] < self.threshold:
            tally.decision = "falls"
        elif tally.trials >= self.search.budget:
            recall = tally.recall
            tally.decision = "holds" if recall is not None and recall >= self.threshold else "falls"
            tally.on_budget = True

    def bracket(self) -> tuple[int | None, int | None]:
        """(the longest length that held, the shortest that fell above it); None where there is none."""
        held = [n for n, t in self.tallies.items() if t.decision == "holds"]
        fell = [n for n, t in self.tallies.items() if t.decision == "falls"]
        longest = max(held) if held else None
        above = [n for n in fell if longest is None or n > longest]
        return longest, (min(above) if above else None)

    @property
    def cases_spent(self) -> int:
        return sum(t.cases for t in self.tallies.values())

    def grid_equivalent(self, cases_per_trial: int) -> tuple[int, int]:
        """(lengths, cases) of the full grid MIN..MAX at the bracket's resolution and the full budget."""
        held, fell = self.bracket()
        low, high = self.search.low, self.search.high
        ratio = fell / held if held and fell else 1 + RESOLUTION
        points = math.ceil(math.log(high / low) / math.log(max(ratio, 1 + 1e-9))) + 1
        return points, points * self.search.budget * cases_per_trial
