"""Turns: the start order of requests when several runners run at once (an interleaved compare).

Each runner is a lane. Requests start case by case, lane by lane: A1 B1 A2 B2 ... (the cases' order is
the runs' shared recipe order, so request i of every lane is the same case). A lane keeps its own
concurrency, but may not start its next case before every other lane started the cases before it, so
a faster variant waits for the slower one and machine drift falls on both alike. A case that sends no
request (not applicable, too long) still takes its turn.
"""

from __future__ import annotations

import asyncio
import heapq
from collections.abc import Sequence
from dataclasses import dataclass


class Turns:
    """Shared by the runners of one interleaved execution; `lane(i)` is what runner i holds."""

    def __init__(self, lanes: int, order: Sequence[str]):
        self._lanes = lanes
        self._position = {case_id: i for i, case_id in enumerate(order)}
        self._joined: dict[int, list[str]] = {}
        self._queue: list[tuple[int, str]] = []  # (lane, case id) in start order, once every lane joined
        self._next = 0
        self._moved = asyncio.Condition()

    def lane(self, index: int) -> LaneTurns:
        return LaneTurns(self, index)

    async def join(self, lane: int, case_ids: Sequence[str]) -> None:
        """The cases lane will start, in its own order; the order of turns is set once all lanes joined."""
        async with self._moved:
            self._joined[lane] = list(case_ids)
            if len(self._joined) == self._lanes:
                unknown = len(self._position)  # a case outside the shared order goes after it
                keyed = [
                    [(self._position.get(case_id, unknown), index, case_id) for case_id in ids]
                    for index, ids in sorted(self._joined.items())
                ]
                # merging keeps each lane's own order, which its workers follow (else it would deadlock)
                self._queue = [(index, case_id) for _, index, case_id in heapq.merge(*keyed)]
                self._moved.notify_all()

    async def take(self, lane: int, case_id: str) -> None:
        """Wait until it is this case's turn to start, then pass the turn on."""
        async with self._moved:
            await self._moved.wait_for(lambda: self._turn() == (lane, case_id))
            self._next += 1
            self._moved.notify_all()

    def _turn(self) -> tuple[int, str] | None:
        return self._queue[self._next] if self._next < len(self._queue) else None


@dataclass(frozen=True)
class LaneTurns:
    """One runner's side of Turns."""

    turns: Turns
    index: int

    async def join(self, case_ids: Sequence[str]) -> None:
        await self.turns.join(self.index, case_ids)

    async def take(self, case_id: str) -> None:
        await self.turns.take(self.index, case_id)
