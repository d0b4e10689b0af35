"""The pure parts of placing servers on a cluster: how many nodes of what size a profile asks for, the
multi-node argv of each engine's kind, how a lost actor is classified, and when two runs' servers
shared a node (no Ray needed: these are functions of their inputs)."""

from __future__ import annotations

import pytest

from launchers.kinds import kind_of
from launchers.profiles import apply_overrides
from launchers.ray_cluster.placement import NodeOffer, fits, server_ask
from launchers.ray_cluster.remote import actor_loss
from recall_eval.errors import BadInput
from recall_eval.placement_store import Placement, Placements, lifetime, shared_nodes
from recall_eval.types import Profile

NODES = [NodeOffer("a" * 8, "10.0.0.1", 8.0, 64.0), NodeOffer("b" * 8, "10.0.0.2", 8.0, 64.0)]


def sglang(tp: int) -> Profile:
    return Profile(name=f"tp{tp}", engine="sglang", model_path="/m", tp=tp)


def test_a_server_within_one_node_asks_for_one_bundle() -> None:
    ask = server_ask(sglang(8), None, NODES)
    assert (ask.nodes, ask.gpus_per_node, ask.gpus) == (1, 8, 8)
    assert ask.bundles() == [{"CPU": 1.0, "GPU": 8.0}] and fits(ask, NODES) is None


def test_a_server_beyond_one_node_spans_nodes_evenly() -> None:
    ask = server_ask(sglang(16), None, NODES)
    assert (ask.nodes, ask.gpus_per_node) == (2, 8) and len(ask.bundles()) == 2
    assert fits(ask, NODES) is None
    assert server_ask(sglang(12), 8, NODES).gpus_per_node == 6  # 2 nodes of 6 GPUs each
    too_big = server_ask(sglang(32), None, NODES)
    assert too_big.nodes == 4 and "needs 4 nodes of 8 GPU(s)" in (fits(too_big, NODES) or "")
    with pytest.raises(BadInput, match="do not split evenly"):
        server_ask(sglang(7), 4, NODES)


def test_the_reference_engine_reserves_its_tp_but_has_no_multi_node_form() -> None:
    reference = Profile(name="ref", engine="reference")
    assert server_ask(reference, None, NODES).gpus == 1
    assert kind_of(reference).gpus_needed(reference) == 0  # on this machine it needs no GPU
    with pytest.raises(BadInput, match="no multi-node form"):
        kind_of(reference).rank_specs(reference, 2, 1, "10.0.0.1:5000")


def test_sglang_ranks_carry_nnodes_node_rank_and_rank_zeros_address() -> None:
    profile = apply_overrides(sglang(16), {"index_k_dtype": "bf16"})
    for rank in (0, 1):
        (spec,) = kind_of(profile).rank_specs(profile, 2, rank, "10.0.0.1:5000")
        argv = list(spec.argv)
        assert argv[argv.index("--nnodes") + 1] == "2" and argv[argv.index("--node-rank") + 1] == str(rank)
        assert argv[argv.index("--dist-init-addr") + 1] == "10.0.0.1:5000"
        assert spec.is_endpoint == (rank == 0) and spec.name == ("main" if rank == 0 else "rank1")


def test_vllm_ranks_use_its_multiprocessing_form() -> None:
    profile = Profile(name="v", engine="vllm", model_path="/m", tp=16)
    (zero,) = kind_of(profile).rank_specs(profile, 2, 0, "10.0.0.1:5000")
    (one,) = kind_of(profile).rank_specs(profile, 2, 1, "10.0.0.1:5000")
    for spec, rank in ((zero, 0), (one, 1)):
        argv = list(spec.argv)
        assert argv[argv.index("--node-rank") + 1] == str(rank)
        assert (argv[argv.index("--master-addr") + 1], argv[argv.index("--master-port") + 1]) == (
            "10.0.0.1",
            "5000",
        )
    assert "--headless" in one.argv and "--headless" not in zero.argv
    assert kind_of(profile).cluster_gpus(profile) == 16


class NodeDied(Exception):
    pass


class Preempted(Exception):
    preempted = True


def test_a_lost_actor_is_classified() -> None:
    node = actor_loss(NodeDied("The actor died because its node has died. Node Id: abc"))
    assert node.outcome == "crash" and node.reason.startswith("node died")
    assert actor_loss(Preempted("the node was drained")).reason.startswith("preempted")
    oom = actor_loss(NodeDied("Task was killed due to the node running low on memory."))
    assert oom.outcome == "oom"
    other = actor_loss(
        NodeDied(
            "The actor died unexpectedly before finishing this task.\n\tpid: 12\nThe actor is dead because its worker "
            "process has died. Worker exit type: SYSTEM_ERROR. Some common causes include: (1) the process was "
            "killed by the OOM killer due to high memory usage."
        )
    )
    assert other.outcome == "crash" and "Ray actor running the server was lost" in other.reason
    assert "its worker process has died" in other.reason and "pid: 12" not in other.reason


def placed(node: str, start: float, stop: float | None) -> Placements:
    server = Placement(
        name="main",
        rank=0,
        nodes=1,
        node_id=node,
        node_ip="x",
        gpu_ids=("0",),
        requested_at=start,
        ready_at=start,
        stopped_at=stop,
    )
    return Placements(servers=(server,))


def test_servers_alive_together_on_one_node_shared_it() -> None:
    assert shared_nodes([placed("n1", 0, 10), placed("n1", 5, 20)]) == {"n1"}
    assert shared_nodes([placed("n1", 0, 10), placed("n2", 5, 20)]) == set()  # at once, other nodes
    assert shared_nodes([placed("n1", 0, 10), placed("n1", 10, 20)]) == set()  # one after the other
    assert lifetime(placed("n1", 3, None)) == (3, None)
