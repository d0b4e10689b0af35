"""recall_eval.turns: lanes (runners running at once) start their cases in turn, case by case."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Sequence

from recall_eval.turns import Turns


async def run_lanes(
    order: Sequence[str], lanes: Sequence[Sequence[str]], workers: int, speeds: Sequence[float]
) -> list[tuple[int, str]]:
    """Each lane as the runner drives it: `workers` tasks taking its cases in order; returns the starts."""
    turns = Turns(len(lanes), order)
    starts: list[tuple[int, str]] = []
    rng = random.Random(7)

    async def lane_run(index: int, case_ids: Sequence[str]) -> None:
        lane = turns.lane(index)
        await lane.join(case_ids)
        queue = list(case_ids)

        async def worker() -> None:
            while queue:
                case_id = queue.pop(0)
                await lane.take(case_id)
                starts.append((index, case_id))
                await asyncio.sleep(speeds[index] * rng.random())

        async with asyncio.TaskGroup() as group:
            for _ in range(workers):
                group.create_task(worker())

    async with asyncio.TaskGroup() as group:
        for index, case_ids in enumerate(lanes):
            group.create_task(lane_run(index, case_ids))
    return starts


def test_two_lanes_alternate_case_by_case_whatever_their_speed() -> None:
    cases = [f"c{i}" for i in range(12)]
    for workers in (1, 3):
        starts = asyncio.run(run_lanes(cases, [cases, cases], workers, speeds=(0.001, 0.01)))
        assert starts == [(lane, case) for case in cases for lane in (0, 1)]


def test_lanes_with_different_pending_cases_follow_the_shared_order() -> None:
    cases = [f"c{i}" for i in range(6)]
    # a resume: lane 0 had finished c0 and c1, lane 1 only c0; lane 2 has a case outside the order
    lanes = [cases[2:], cases[1:], [*cases[::2], "extra"]]
    starts = asyncio.run(run_lanes(cases, lanes, 2, speeds=(0.002, 0.001, 0.003)))
    assert starts == [
        (2, "c0"),
        (1, "c1"),
        (0, "c2"), (1, "c2"), (2, "c2"),
        (0, "c3"), (1, "c3"),
        (0, "c4"), (1, "c4"), (2, "c4"),
        (0, "c5"), (1, "c5"),
        (2, "extra"),
    ]  # fmt: skip
