"""`ray-status`: what a Ray cluster offers against what the named profiles need (the library side)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from recall_eval.api.options import DEFAULT_PROFILE

if TYPE_CHECKING:
    from launchers.ray_cluster.status import ClusterStatus


def ray_status(
    address: str,
    profiles: Sequence[str] = (),
    node_gpus: int | None = None,
    place: bool = False,
    profiles_file: Path | None = None,
) -> ClusterStatus:
    """The cluster's nodes and free resources, and per profile how many nodes of what size its server
    takes and whether the cluster can hold it; place: also reserve each multi-node profile's placement
    for real and return every rank's node and argv (released afterwards; nothing starts)."""
    from launchers.kinds import build_command
    from launchers.profiles import resolve_profile
    from launchers.ray_cluster.session import import_ray, ray_session
    from launchers.ray_cluster.status import cluster_status

    resolved = [resolve_profile(name, {}, profiles_file) for name in (profiles or [DEFAULT_PROFILE])]
    for profile in resolved:
        build_command(profile)  # a profile its engine cannot launch: BadInput before joining
    with ray_session(address):
        return cluster_status(import_ray(), resolved, node_gpus, place)
