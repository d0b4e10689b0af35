"""placements.json in a run directory: where each server of a run placed on a cluster ran, and when.

Written by the driver (launchers.ray_cluster.remote) as each server is requested, becomes ready and
stops; one entry per process per start (a relaunch adds entries). Read by `compare` to say whether two
variants' servers ran at the same time and whether they shared a node (their speeds are then not those
of a node each). A run whose servers ran on the harness's own machine has no such file.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Sequence
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from recall_eval.store import write_atomically

PLACEMENTS_FILE = "placements.json"
PLACEMENTS_FORMAT = 1
_LOCK = threading.Lock()


class Placement(BaseModel):
    model_config = ConfigDict(frozen=True, extra="allow")  # a newer recall-eval's fields are kept

    name: str  # the process's name in its deployment ("main", "rank1", ...)
    rank: int  # its node rank (0 for a one-node server)
    nodes: int  # how many nodes the server spans
    node_id: str  # Ray's node id
    node_ip: str
    gpu_ids: tuple[str, ...]  # the GPUs Ray gave it on that node
    actor_pid: int | None = None  # the Ray worker process running its actor, on that node
    url: str | None = None  # the endpoint (rank 0)
    requested_at: float  # time.time() when the driver asked Ray for it
    ready_at: float | None = None  # when it answered as ready (None: never)
    stopped_at: float | None = None  # when it was stopped or found dead


class Placements(BaseModel):
    model_config = ConfigDict(frozen=True, extra="allow")

    format_version: int = PLACEMENTS_FORMAT
    servers: tuple[Placement, ...] = ()


def read_placements(run_dir: Path) -> Placements | None:
    """The run's placements; None when it has none (its servers ran locally) or it cannot be read."""
    try:
        return Placements.model_validate_json((run_dir / PLACEMENTS_FILE).read_bytes())
    except (OSError, ValueError):
        return None


def record_placement(run_dir: Path, placement: Placement) -> None:
    """Add an entry, or replace the entry of the same name and requested_at (its later state)."""
    with _LOCK:
        current = read_placements(run_dir) or Placements()
        kept = [
            p for p in current.servers if (p.name, p.requested_at) != (placement.name, placement.requested_at)
        ]
        updated = current.model_copy(update={"servers": (*kept, placement)})
        write_atomically(
            run_dir / PLACEMENTS_FILE, json.dumps(updated.model_dump(mode="json"), indent=2).encode()
        )


def lifetime(placements: Placements) -> tuple[float, float | None] | None:
    """From the first request to the last stop of the run's servers (None: no server)."""
    if not placements.servers:
        return None
    stops = [p.stopped_at for p in placements.servers]
    end = None if any(s is None for s in stops) else max(s for s in stops if s is not None)
    return min(p.requested_at for p in placements.servers), end


def shared_nodes(runs: Sequence[Placements]) -> set[str]:
    """Node ids on which servers of two or more of the runs were alive at the same time."""
    spans: list[tuple[int, str, float, float]] = []
    for index, placements in enumerate(runs):
        for p in placements.servers:
            start = p.ready_at or p.requested_at
            spans.append((index, p.node_id, start, p.stopped_at or float("inf")))
    shared = set()
    for i, (run_a, node_a, start_a, end_a) in enumerate(spans):
        for run_b, node_b, start_b, end_b in spans[i + 1 :]:
            if run_a != run_b and node_a == node_b and start_a < end_b and start_b < end_a:
                shared.add(node_a)
    return shared
