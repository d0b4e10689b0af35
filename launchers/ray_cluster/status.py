"""What a Ray cluster offers against what profiles need, and where a server's ranks would go.

`placed_ranks` reserves the profile's placement for real (the same placement group and actors a
launch uses), asks every rank's actor for its node and the argv it would start, then releases it all;
nothing is started. `recall-eval ray-status --place` prints it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from launchers.ray_cluster.actor import ServerActor
from launchers.ray_cluster.placement import (
    NodeOffer,
    ServerAsk,
    actor_options,
    cluster_nodes,
    fits,
    reserve,
    server_ask,
)
from recall_eval.types import Profile

PLACE_TIMEOUT_S = 60.0


@dataclass(frozen=True)
class RankPlacement:
    rank: int
    node_id: str
    node_ip: str
    gpu_ids: tuple[str, ...]
    argv: tuple[str, ...]


@dataclass(frozen=True)
class ProfileNeed:
    profile: str
    ask: ServerAsk
    fits: str | None  # None: the cluster can hold it (when idle); else what is missing
    ranks: tuple[RankPlacement, ...] = ()


@dataclass(frozen=True)
class ClusterStatus:
    nodes: tuple[NodeOffer, ...]
    available: dict[str, float]  # what is free now (Ray's available_resources)
    needs: tuple[ProfileNeed, ...] = field(default=())


def placed_ranks(ray: Any, profile: Profile, ask: ServerAsk) -> tuple[RankPlacement, ...]:
    """Each rank's node and argv, from a real placement that is released afterwards."""
    group = reserve(ray, ask)
    remote_class = ray.remote(ServerActor)
    actors = [
        remote_class.options(**actor_options(ask, group, rank)).remote(
            profile.model_dump(mode="json"), ask.nodes, rank
        )
        for rank in range(ask.nodes)
    ]
    try:
        wheres = ray.get([actor.where.remote() for actor in actors], timeout=PLACE_TIMEOUT_S)
        dist = ray.get(actors[0].dist_init_addr.remote(), timeout=PLACE_TIMEOUT_S)
        argvs = ray.get([actor.rank_argv.remote(dist) for actor in actors], timeout=PLACE_TIMEOUT_S)
        return tuple(
            RankPlacement(rank, where["node_id"], where["node_ip"], tuple(where["gpu_ids"]), tuple(argv[0]))
            for rank, (where, argv) in enumerate(zip(wheres, argvs, strict=True))
        )
    finally:
        for actor in actors:
            ray.kill(actor)
        if group is not None:
            from ray.util.placement_group import remove_placement_group

            remove_placement_group(group)


def cluster_status(ray: Any, profiles: list[Profile], node_gpus: int | None, place: bool) -> ClusterStatus:
    nodes = cluster_nodes(ray)
    # free now, before this status's own placements (released asynchronously) take any
    available = {
        key: float(value) for key, value in ray.available_resources().items() if key in ("CPU", "GPU")
    }
    needs = []
    for profile in profiles:
        ask = server_ask(profile, node_gpus, nodes)
        missing = fits(ask, nodes)
        ranks = placed_ranks(ray, profile, ask) if place and missing is None and ask.nodes > 1 else ()
        needs.append(ProfileNeed(profile.name, ask, missing, ranks))
    return ClusterStatus(tuple(nodes), available, tuple(needs))
