"""`compare --ray` on a two-raylet Ray cluster on 127.0.0.1 (tests/ray/conftest.py), the reference
engine standing for a GPU server (each reserves tp logical GPUs).

- the two variants' servers run at the same time (their lifetimes, from placements.json, overlap) and
  the compare's results equal, case by case, those of the same compare without Ray;
- SIGKILL of the driver mid-run leaves no server process and no actor after 15 s, `runs` shows the
  runs interrupted, and running the compare again resumes them to the same final counts;
- every socket the cluster opened listens on loopback.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from tests.e2e.cli import REPO, cli_env, run_cli, start_cli
from tests.ray.conftest import LoopbackCluster

pytestmark = [pytest.mark.ray, pytest.mark.slow]

GRID = ["--lengths", "338,700", "--depths", "50", "--trials", "2", "--max-tokens", "4"]
CASES = 2 * 1 * 2
LOOPBACK = {"127.0.0.1", "::1", "::ffff:127.0.0.1"}


def compare(home: Path, *extra: str, timeout: float = 420) -> tuple[dict, list[Path]]:
    done = run_cli("compare", "fp8", "bf16", *GRID, *extra, home=home, timeout=timeout)
    assert done.returncode == 0, done.stderr[-3000:]
    html = Path(done.stdout.strip().splitlines()[-1])
    manifest = json.loads((html.parent / "compare.json").read_text())
    dirs = [(html.parent / v["run_dir"]).resolve() for v in manifest["variants"]]
    return manifest, dirs


def outcomes(run_dir: Path) -> dict[str, tuple[str, str | None]]:
    """case id -> (outcome, strict outcome), the last line of each case counting."""
    rows = [json.loads(line) for line in (run_dir / "results.jsonl").read_text().splitlines()]
    return {row["case_id"]: (row["outcome"], row.get("strict_outcome")) for row in rows}


def server_ports(home: Path) -> set[int]:
    """The ports of every server placed for runs under `home` (their placements.json)."""
    ports = set()
    for path in home.glob("*/placements.json"):
        for server in json.loads(path.read_text())["servers"]:
            if server.get("url"):
                ports.add(int(server["url"].rsplit(":", 1)[1]))
    return ports


def listening(ports: set[int]) -> list[psutil.Process]:
    """The processes listening on any of `ports` (a server started on a Ray worker has the raylet's
    environment, not the driver's: it is found by its port), with their process groups."""
    pids = {
        conn.pid
        for conn in psutil.net_connections(kind="inet")
        if conn.status == psutil.CONN_LISTEN and conn.laddr.port in ports and conn.pid
    }
    return [psutil.Process(pid) for pid in pids if psutil.pid_exists(pid)]


def alive(processes: list[psutil.Process]) -> list[psutil.Process]:
    return [p for p in processes if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]


def group_pids(pgid: int) -> list[int]:
    """A server's process group (it runs in a session of its own)."""
    found = []
    for proc in psutil.process_iter():
        try:
            if os.getpgid(proc.pid) == pgid:
                found.append(proc.pid)
        except (ProcessLookupError, PermissionError, psutil.Error):
            continue
    return found


def alive_actors(address: str) -> int:
    done = subprocess.run(
        [sys.executable, "-m", "tests.ray.alive_actors", address],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
        env=cli_env(),
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return int(done.stdout.strip().splitlines()[-1])


MID_RUN_GRID = ["--lengths", "338,700", "--depths", "25,50,75", "--trials", "2", "--max-tokens", "4"]


def compare_mid_run(cluster: LoopbackCluster, home: Path) -> tuple[subprocess.Popen, float]:
    """`compare fp8 bf16 --ray` started and waited on until a server answered and a result is stored;
    the driver and the 300 s deadline it was given."""
    driver = start_cli("compare", "fp8", "bf16", *MID_RUN_GRID, "--ray", cluster.address, home=home)
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        if any(path.stat().st_size > 0 for path in home.glob("*/results.jsonl")):
            return driver, deadline
        assert driver.poll() is None, driver.communicate()[0][-3000:]
        time.sleep(0.2)
    pytest.fail("no result was stored in 300 s")


def test_compare_on_ray_overlaps_and_matches_the_local_compare(
    ray_cluster: LoopbackCluster, tmp_path: Path
) -> None:
    on_ray, on_ray_dirs = compare(tmp_path / "ray", "--ray", ray_cluster.address)
    local, local_dirs = compare(tmp_path / "local")

    # the two servers ran at the same time: each became ready before the other stopped
    spans = []
    for run_dir in on_ray_dirs:
        (server,) = json.loads((run_dir / "placements.json").read_text())["servers"]
        assert server["nodes"] == 1 and server["rank"] == 0 and len(server["gpu_ids"]) == 1
        assert server["node_ip"] == "127.0.0.1" and server["url"].startswith("http://127.0.0.1:")
        assert server["requested_at"] <= server["ready_at"] <= server["stopped_at"]
        spans.append((server["ready_at"], server["stopped_at"]))
        # the server's log came back to the run directory, headed by its command
        log = (run_dir / "server-main.log").read_text()
        assert "===== recall-eval: start of main" in log and "launchers.reference.server" in log
    (a_ready, a_stop), (b_ready, b_stop) = spans
    assert a_ready < b_stop and b_ready < a_stop
    pair = on_ray["numbers"]["pairs"][0]
    assert pair["placement"] in ("shared node", "same time")  # never described as sequential
    assert "sequential runs" not in on_ray["verdict"]
    assert local["numbers"]["pairs"][0]["placement"] is None

    # same cases, same outcomes and verdicts, same counts as without Ray
    for ray_dir, local_dir in zip(on_ray_dirs, local_dirs, strict=True):
        ray_run, local_run = (json.loads((d / "run.json").read_text()) for d in (ray_dir, local_dir))
        assert ray_run["status"] == local_run["status"] == "finished"
        assert ray_run["server_info"]["index_k_dtype"] == local_run["server_info"]["index_k_dtype"]
        assert outcomes(ray_dir) == outcomes(local_dir) and len(outcomes(ray_dir)) == CASES
    assert pair["overall"] == local["numbers"]["pairs"][0]["overall"]  # counts, flips and p-value
    assert not listening(server_ports(tmp_path / "ray"))
    assert alive_actors(ray_cluster.address) == 0


def test_sigkill_of_the_driver_leaves_nothing_and_the_compare_resumes(
    ray_cluster: LoopbackCluster, tmp_path: Path
) -> None:
    home = tmp_path / "runs"
    driver, deadline = compare_mid_run(ray_cluster, home)
    servers: list[psutil.Process] = []
    while time.monotonic() < deadline and len(servers) < 2:  # both servers up (placed at once)
        servers = listening(server_ports(home))
        time.sleep(0.2)
    assert len(servers) == 2
    groups = [psutil.Process(pid) for server in servers for pid in group_pids(server.pid)]
    driver.kill()  # SIGKILL: no handler, no atexit
    driver.wait()
    killed_at = time.monotonic()
    while time.monotonic() - killed_at < 15 and alive(groups):
        time.sleep(0.5)
    assert not alive(groups), f"server processes outlived their driver by 15 s: {alive(groups)}"
    print(f"servers gone {time.monotonic() - killed_at:.1f} s after the driver's SIGKILL")  # shown with -s
    assert alive_actors(ray_cluster.address) == 0

    listed = run_cli("runs", home=home)
    assert listed.returncode == 0, listed.stderr
    run_lines = [line for line in listed.stdout.splitlines() if "fp8" in line or "bf16" in line]
    assert run_lines and all("interrupted" in line for line in run_lines), listed.stdout

    done = run_cli(
        "compare", "fp8", "bf16", *MID_RUN_GRID, "--ray", ray_cluster.address, home=home, timeout=420
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "resuming run" in done.stderr
    manifest = json.loads((Path(done.stdout.strip().splitlines()[-1]).parent / "compare.json").read_text())
    for variant in manifest["variants"]:
        run_dir = (home / manifest["compare_id"] / variant["run_dir"]).resolve()
        assert json.loads((run_dir / "run.json").read_text())["status"] == "finished"
        assert len(outcomes(run_dir)) == 2 * 3 * 2  # every case once, none lost or doubled
    assert not listening(server_ports(home))


def test_every_socket_ray_opened_listens_on_loopback(ray_cluster: LoopbackCluster) -> None:
    pids = {proc.pid for proc in ray_cluster.processes()}
    listening = [
        conn
        for conn in psutil.net_connections(kind="inet")
        if conn.status == psutil.CONN_LISTEN and conn.pid in pids
    ]
    assert len(listening) >= 3  # GCS, raylets, agents at least
    outside = [
        f"{conn.laddr.ip}:{conn.laddr.port} (pid {conn.pid})"
        for conn in listening
        if conn.laddr.ip not in LOOPBACK
    ]
    assert not outside, outside
    # ... and none talks to anything beyond loopback
    remote = [
        conn
        for conn in psutil.net_connections(kind="inet")
        if conn.pid in pids and conn.raddr and conn.raddr.ip not in LOOPBACK
    ]
    assert not remote, remote


def test_ctrl_c_of_the_driver_stops_every_server_and_leaves_the_runs_resumable(
    ray_cluster: LoopbackCluster, tmp_path: Path
) -> None:
    home = tmp_path / "runs"
    driver, _ = compare_mid_run(ray_cluster, home)
    servers = listening(server_ports(home))
    driver.send_signal(signal.SIGINT)
    out, _ = driver.communicate(timeout=120)
    assert driver.returncode == 130, out[-3000:]
    assert "Traceback" not in out, out[-3000:]  # a clean stop: no Ray call after the session ended
    stopped_at = time.monotonic()
    while time.monotonic() - stopped_at < 15 and alive(servers):
        time.sleep(0.5)
    assert not alive(servers) and alive_actors(ray_cluster.address) == 0
    listed = run_cli("runs", home=home)
    assert listed.stdout.count("interrupted") >= 2, listed.stdout
