"""A tp=2 SGLang profile on nodes of one GPU each: one STRICT_SPREAD placement group, its two ranks on
different raylets, each with the argv SGLang's multi-node form needs (`recall-eval ray-status --place`
reserves the placement for real, asks each rank's actor for its argv, and releases it; nothing starts).
The argv are parsed by SGLang's own parser."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.e2e.cli import run_cli
from tests.ray.conftest import NODE_GPUS, LoopbackCluster

pytestmark = [pytest.mark.ray]

PROFILES = """
[profiles.sglang-tp2]
engine = "sglang"
model_path = "/models/DeepSeek-V4-Flash"
tp = 2
index_k_dtype = "bf16"

[profiles.sglang-tp8]
engine = "sglang"
model_path = "/models/DeepSeek-V4-Flash"
tp = 8

[profiles.sglang-tp3]
engine = "sglang"
model_path = "/models/DeepSeek-V4-Flash"
tp = 3
"""


def status(cluster: LoopbackCluster, tmp_path: Path, *args: str) -> dict:
    profiles = tmp_path / "profiles.toml"
    profiles.write_text(PROFILES)
    done = run_cli("ray-status", *args, "--profiles-file", str(profiles), "--ray", cluster.address, "--json")
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)


def flag(argv: list[str], name: str) -> str:
    return argv[argv.index(name) + 1]


def test_tp2_sglang_spans_two_raylets_with_its_node_ranks(
    ray_cluster: LoopbackCluster, tmp_path: Path
) -> None:
    found = status(ray_cluster, tmp_path, "sglang-tp2", "--ray-node-gpus", "1", "--place")
    assert len(found["nodes"]) == 2 and all(node["gpus"] == NODE_GPUS for node in found["nodes"])
    (need,) = found["needs"]
    assert need["ask"]["nodes"] == 2 and need["ask"]["gpus_per_node"] == 1 and need["fits"] is None
    ranks = need["ranks"]
    assert [rank["rank"] for rank in ranks] == [0, 1]
    assert ranks[0]["node_id"] != ranks[1]["node_id"]  # STRICT_SPREAD: one rank per raylet
    assert all(len(rank["gpu_ids"]) == 1 for rank in ranks)
    addresses = set()
    for rank in ranks:
        argv = list(rank["argv"])
        assert argv[1:3] == ["-m", "sglang.launch_server"]
        assert (flag(argv, "--nnodes"), flag(argv, "--node-rank"), flag(argv, "--tp-size")) == (
            "2",
            str(rank["rank"]),
            "2",
        )
        addresses.add(flag(argv, "--dist-init-addr"))
    (address,) = addresses  # every rank meets at rank 0's address
    assert address.rsplit(":", 1)[0] == ranks[0]["node_ip"] == "127.0.0.1"


@pytest.mark.sglang
def test_each_rank_argv_parses_with_sglang(ray_cluster: LoopbackCluster, tmp_path: Path) -> None:
    from sglang.srt.server_args import prepare_server_args

    found = status(ray_cluster, tmp_path, "sglang-tp2", "--ray-node-gpus", "1", "--place")
    for rank in found["needs"][0]["ranks"]:
        args = prepare_server_args(list(rank["argv"][3:]))
        assert (args.nnodes, args.node_rank, args.tp_size) == (2, rank["rank"], 2)
        assert args.dist_init_addr.startswith("127.0.0.1:")


def test_what_the_cluster_offers_against_what_profiles_need(
    ray_cluster: LoopbackCluster, tmp_path: Path
) -> None:
    found = status(ray_cluster, tmp_path, "reference", "sglang-tp2", "sglang-tp8", "--ray-node-gpus", "2")
    assert found["available"]["GPU"] == 2 * NODE_GPUS
    reference, tp2, tp8 = found["needs"]
    assert reference["ask"] == {"profile": "reference", "gpus": 1, "nodes": 1, "gpus_per_node": 1}
    assert tp2["ask"]["nodes"] == 1 and reference["fits"] is None and tp2["fits"] is None
    assert tp8["ask"]["nodes"] == 4 and tp8["ask"]["gpus_per_node"] == 2
    assert (
        "needs 4 nodes of 2 GPU(s)" in tp8["fits"] and "the cluster offers 127.0.0.1 (2 GPU)" in tp8["fits"]
    )


def test_a_tp_that_does_not_split_over_nodes_is_one_line(
    ray_cluster: LoopbackCluster, tmp_path: Path
) -> None:
    profiles = tmp_path / "profiles.toml"
    profiles.write_text(PROFILES)
    done = run_cli(
        "ray-status",
        "sglang-tp3",
        "--profiles-file",
        str(profiles),
        "--ray",
        ray_cluster.address,
        "--ray-node-gpus",
        "2",
    )
    assert done.returncode == 2
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "3 GPUs do not split evenly over 2 nodes of 2" in lines[0], done.stderr
