"""A short kill soak (tests/benchmarks/soak_kill.py): SIGKILLs of the harness and of its server at
points across a real reference sweep (each once a few more results are stored, so each lands while the
grid has cases left, whatever the machine's speed), resumed each time; nothing lost, nothing twice,
nothing left running."""

from __future__ import annotations

import pytest

from tests.benchmarks.soak_kill import soak

pytestmark = pytest.mark.slow


def test_short_kill_soak_loses_nothing_and_leaves_nothing(tmp_path):
    result = soak(
        kills=3, seed=3, concurrency=2, lengths="400,800,1600", depths="0,50,100", trials=2, work=tmp_path,
        by_results=True,
    )  # fmt: skip
    assert result.status == "finished"
    assert sum(result.kills.values()) == 3, result  # every kill landed (at most 3 x 3 of the 18 cases)
    assert (result.lost, result.duplicated, result.leftovers) == (0, 0, 0), result
    assert result.cases == 18
