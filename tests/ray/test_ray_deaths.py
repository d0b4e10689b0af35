"""A server's actor lost mid-run (its Ray worker killed, as when Ray or a node takes it away): the run
classifies the loss, Ray places the server again, and the sweep finishes with every case once. Also
`sweep --ray` and `serve --ray` on the loopback cluster (tests/ray/conftest.py)."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import httpx
import pytest

from tests.e2e.cli import run_cli, start_cli
from tests.ray.conftest import LoopbackCluster
from tests.ray.test_ray_compare import alive_actors, listening, server_ports

pytestmark = [pytest.mark.ray, pytest.mark.slow]

GRID = [
    "--lengths",
    "338,700",
    "--depths",
    "25,50,75",
    "--trials",
    "2",
    "--max-tokens",
    "4",
    "--concurrency",
    "1",
]
CASES = 2 * 3 * 2


def test_a_lost_actor_is_classified_and_the_server_placed_again(
    ray_cluster: LoopbackCluster, tmp_path: Path
) -> None:
    home = tmp_path / "runs"
    sweep = start_cli("sweep", *GRID, "--ray", ray_cluster.address, home=home, stderr=None)
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:  # a result stored: the server is up and answering
        if any(path.stat().st_size > 0 for path in home.glob("*/results.jsonl")):
            break
        assert sweep.poll() is None, sweep.communicate()[0][-3000:]
        time.sleep(0.2)
    (placements,) = home.glob("*/placements.json")
    (first,) = json.loads(placements.read_text())["servers"]
    os.kill(first["actor_pid"], signal.SIGKILL)  # the actor's worker process, not the server
    out, _ = sweep.communicate(timeout=420)
    assert sweep.returncode == 0, out[-3000:]
    run_dir = placements.parent
    run = json.loads((run_dir / "run.json").read_text())
    assert run["status"] == "finished" and run["relaunches"] >= 1
    lines = [json.loads(line) for line in (run_dir / "results.jsonl").read_text().splitlines()]
    assert len({line["case_id"] for line in lines}) == CASES
    died = [line for line in lines if line["outcome"] == "crash"]
    assert died and all("Ray actor running the server was lost" in line["error"] for line in died), died
    starts = json.loads(placements.read_text())["servers"]
    assert len(starts) >= 2 and starts[0]["actor_pid"] != starts[-1]["actor_pid"]
    assert all(s["stopped_at"] is not None for s in starts)
    log = (run_dir / "server-main.log").read_text()
    assert log.count("===== recall-eval: start of main") >= 2  # both starts' logs came back
    assert not listening(server_ports(home)) and alive_actors(ray_cluster.address) == 0


def test_serve_on_the_cluster_answers_and_stops(ray_cluster: LoopbackCluster, tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    serve = start_cli("serve", "reference", "--ray", ray_cluster.address, "--log-dir", str(logs), stderr=None)
    assert serve.stdout is not None
    endpoint = None
    for line in serve.stdout:
        if line.startswith("endpoint "):
            endpoint = line.split()[1]
            break
    assert endpoint is not None and endpoint.startswith("http://127.0.0.1:")
    models = httpx.get(f"{endpoint}/v1/models", timeout=30).json()
    assert models["data"]
    serve.send_signal(signal.SIGINT)
    serve.communicate(timeout=120)
    assert serve.returncode == 0
    assert "launchers.reference.server" in (logs / "server-main.log").read_text()
    assert json.loads((logs / "placements.json").read_text())["servers"][0]["stopped_at"] is not None
    assert not listening({int(endpoint.rsplit(":", 1)[1])})
    assert alive_actors(ray_cluster.address) == 0


def test_sweep_ray_local_starts_its_own_head(tmp_path: Path) -> None:
    done = run_cli(
        "sweep",
        "--lengths",
        "338",
        "--depths",
        "50",
        "--trials",
        "1",
        "--max-tokens",
        "4",
        "--ray",
        "local",
        home=tmp_path,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    (placements,) = tmp_path.glob("*/placements.json")
    (server,) = json.loads(placements.read_text())["servers"]
    assert server["node_ip"] == "127.0.0.1" and server["stopped_at"] is not None
