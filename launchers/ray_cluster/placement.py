"""What a profile asks of a Ray cluster, and where its server's processes go.

A server needs kind.cluster_gpus(profile) GPUs (tp, or tp x dp) and one CPU per node. When that is more
than one node holds (`node_gpus`: given, else the largest GPU count among the cluster's nodes), the
server spans nodes: one bundle per node in a STRICT_SPREAD placement group, each bundle starting the
engine's multi-node form (kind.rank_specs: --nnodes, --node-rank, --dist-init-addr of rank 0).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from launchers.kinds import kind_of
from recall_eval.errors import BadInput, UserError
from recall_eval.types import Profile


@dataclass(frozen=True)
class NodeOffer:
    node_id: str
    ip: str
    gpus: float
    cpus: float


@dataclass(frozen=True)
class ServerAsk:
    """One server's reservation: `nodes` bundles of `gpus_per_node` GPUs and one CPU each."""

    profile: str
    gpus: int
    nodes: int
    gpus_per_node: int

    def bundles(self) -> list[dict[str, float]]:
        bundle: dict[str, float] = {"CPU": 1.0}
        if self.gpus_per_node:
            bundle["GPU"] = float(self.gpus_per_node)
        return [dict(bundle) for _ in range(self.nodes)]

    def describe(self) -> str:
        if self.nodes == 1:
            return f"{self.gpus} GPU(s) on one node"
        return f"{self.nodes} nodes of {self.gpus_per_node} GPU(s) (STRICT_SPREAD, one rank per node)"


def cluster_nodes(ray: Any) -> list[NodeOffer]:
    """The cluster's live nodes and their total resources."""
    return [
        NodeOffer(
            node_id=node["NodeID"],
            ip=node["NodeManagerAddress"],
            gpus=float(node["Resources"].get("GPU", 0.0)),
            cpus=float(node["Resources"].get("CPU", 0.0)),
        )
        for node in ray.nodes()
        if node.get("Alive")
    ]


def server_ask(profile: Profile, node_gpus: int | None, nodes: list[NodeOffer]) -> ServerAsk:
    """How many nodes of how many GPUs the profile's server takes. node_gpus: the size of a node
    (None: the largest node of the cluster)."""
    gpus = kind_of(profile).cluster_gpus(profile)
    size = node_gpus if node_gpus is not None else int(max((n.gpus for n in nodes), default=0))
    if gpus <= size or gpus == 0:
        return ServerAsk(profile.name, gpus, 1, gpus)
    if size <= 0:
        raise UserError(f"profile {profile.name!r} needs {gpus} GPU(s); the Ray cluster has no GPU")
    count = math.ceil(gpus / size)
    if gpus % count:
        raise BadInput(
            f"profile {profile.name!r}: {gpus} GPUs do not split evenly over {count} nodes of {size}; "
            "choose tp as a multiple of the node size"
        )
    kind_of(profile).rank_specs(profile, count, 0, "0.0.0.0:0")  # BadInput for an engine with no form
    return ServerAsk(profile.name, gpus, count, gpus // count)


def fits(ask: ServerAsk, nodes: list[NodeOffer]) -> str | None:
    """None when the cluster (empty) can hold the server; else one line saying what is missing."""
    able = [n for n in nodes if n.gpus >= ask.gpus_per_node and n.cpus >= 1]
    if len(able) >= ask.nodes:
        return None
    offered = ", ".join(f"{n.ip} ({n.gpus:g} GPU)" for n in nodes) or "no live node"
    return f"profile {ask.profile!r} needs {ask.describe()}; the cluster offers {offered}"


def reserve(ray: Any, ask: ServerAsk) -> Any | None:
    """The placement group of a server that spans nodes (None for one node: the actor asks itself);
    waits until Ray has placed it, which queues while the cluster is busy."""
    if ask.nodes == 1:
        return None
    from ray.util.placement_group import placement_group

    group = placement_group(ask.bundles(), strategy="STRICT_SPREAD")
    ray.get(group.ready())
    return group


def actor_options(ask: ServerAsk, group: Any | None, rank: int) -> dict[str, Any]:
    """Ray options of rank `rank`'s actor: its resources, in its bundle when the server spans nodes."""
    options: dict[str, Any] = {"num_cpus": 1, "num_gpus": ask.gpus_per_node, "max_concurrency": 4}
    if group is not None:
        from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

        options["scheduling_strategy"] = PlacementGroupSchedulingStrategy(
            placement_group=group, placement_group_bundle_index=rank
        )
    return options
