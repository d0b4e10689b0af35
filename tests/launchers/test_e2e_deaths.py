"""End to end with the real reference engine, launched through its profile:
- `recall-eval sweep` whose server is killed with SIGKILL mid-sweep: the cases in flight are recorded
  as crash, the server is relaunched, the run finishes with every case exactly once;
- the same, then SIGKILL of the harness after the relaunch: no server process is left 15 s later;
- a real memory-limit death (the engine's RLIMIT_DATA cap) classified as oom with SGLang's line."""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path

import psutil
import pytest

from launchers.lifecycle import ServerStartError, launch
from launchers.ports import free_port
from launchers.profiles import resolve_profile
from launchers.server_records import find_leftovers, live_members, load_records
from recall_eval.store import load_run
from tests.e2e.cli import start_cli

pytestmark = pytest.mark.slow


def reference_server_pid(sweep_pid: int) -> int | None:
    for child in psutil.Process(sweep_pid).children(recursive=True):
        try:
            if "launchers.reference.server" in " ".join(child.cmdline()):
                return child.pid
        except psutil.Error:
            continue
    return None


def result_lines(out: Path) -> list[dict]:
    """Results so far of the one run that `sweep --out OUT` creates under OUT."""
    return [
        json.loads(line)
        for path in out.glob("*/results.jsonl")
        for line in path.read_text().splitlines()
        if line
    ]


def test_kill_9_mid_sweep_records_crash_relaunches_and_finishes(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "runs"
    args = [
        "sweep", "--profile", "reference", "--port", str(free_port()),
        "--lengths", "400,800", "--depths", "0,50,100", "--trials", "1",
        "--concurrency", "2", "--max-tokens", "16", "--out", str(out), "--no-report",
    ]  # fmt: skip
    sweep = start_cli(*args, home=tmp_path / "home", cwd=tmp_path)
    killed_pid = None
    try:
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline and sweep.poll() is None:
            if result_lines(out):
                killed_pid = reference_server_pid(sweep.pid)
                break
            time.sleep(0.05)
        assert killed_pid is not None, "the sweep recorded no result (or its server was not found)"
        psutil.Process(killed_pid).send_signal(signal.SIGKILL)
        output, _ = sweep.communicate(timeout=300)
    finally:
        if sweep.poll() is None:
            sweep.kill()
    assert sweep.returncode == 0, output
    (run_dir,) = [path.parent for path in out.glob("*/run.json")]
    run, results = load_run(run_dir)
    assert run.status == "finished"
    ids = [result.case_id for result in results]
    assert len(ids) == 6 and len(set(ids)) == 6  # every case exactly once
    crashes = [result for result in results if result.outcome == "crash"]
    assert crashes, [result.outcome for result in results]
    assert all("SIGKILL" in (result.error or "") for result in crashes)
    assert any(result.outcome in ("pass", "miss", "empty", "truncated") for result in results)
    assert run.relaunches == 1
    log = (run_dir / "server-main.log").read_text()
    assert (
        "recall-eval: start of main" in log and "recall-eval: relaunch 1, attempt 1/1 of main" in log
    )  # the runner owns the retries
    assert log.count("The server is fired up and ready to roll!") == 2
    records = load_records(run_dir)
    assert [record.pid for record in records][0] == killed_pid and len(records) == 2  # start + relaunch
    assert all(not live_members(record) for record in records), "a server outlived the sweep"


def _sweep_after_relaunch(tmp_path: Path):
    """A sweep whose server was killed and relaunched; returns (sweep, run_dir, relaunched pid)."""
    out = tmp_path / "runs"
    args = [
        "sweep", "--profile", "reference", "--port", str(free_port()),
        "--lengths", "400,800,1600", "--depths", "0,25,50,75,100", "--trials", "2",
        "--max-tokens", "16", "--out", str(out), "--no-report",
    ]  # fmt: skip
    sweep = start_cli(*args, home=tmp_path / "home", cwd=tmp_path)
    deadline = time.monotonic() + 240
    first = None
    while time.monotonic() < deadline and sweep.poll() is None and first is None:
        first = reference_server_pid(sweep.pid) if result_lines(out) else None
        time.sleep(0.05)
    assert first is not None, "the sweep recorded no result (or its server was not found)"
    psutil.Process(first).send_signal(signal.SIGKILL)
    relaunched = None
    while time.monotonic() < deadline and sweep.poll() is None and relaunched is None:
        pid = reference_server_pid(sweep.pid)
        log = next(out.glob("*/server-main.log")).read_text()
        if pid not in (None, first) and log.count("The server is fired up and ready to roll!") == 2:
            relaunched = pid
        time.sleep(0.05)
    assert relaunched is not None, "the server was not relaunched"
    (run_dir,) = [path.parent for path in out.glob("*/run.json")]
    return sweep, run_dir, relaunched


def test_relaunched_server_dies_with_a_killed_harness(tmp_path, monkeypatch):
    """The relaunch ran on a worker thread; kill -9 of the harness must still take it along."""
    monkeypatch.chdir(tmp_path)
    sweep, run_dir, relaunched = _sweep_after_relaunch(tmp_path)
    try:
        sweep.send_signal(signal.SIGKILL)
        sweep.wait(timeout=10)
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline and (psutil.pid_exists(relaunched) or find_leftovers(run_dir)):
            if psutil.pid_exists(relaunched) and psutil.Process(relaunched).status() == psutil.STATUS_ZOMBIE:
                break
            time.sleep(0.2)
        records = load_records(run_dir)
        assert [record.pid for record in records][-1] == relaunched
        assert not any(live_members(record) for record in records), "a server outlived the killed harness"
    finally:
        if sweep.poll() is None:
            sweep.kill()
        for leftover in find_leftovers(run_dir):
            for pid in leftover.pids:
                psutil.Process(pid).kill()


def test_memory_limit_death_is_oom_with_its_line(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    # A pool of 5e7 tokens cannot fit under a 1 GiB cap: the engine dies at start-up, as SGLang does.
    profile = resolve_profile(
        "reference",
        {
            "port": free_port(),
            "memory_limit_gb": 1.0,
            "max_total_tokens": 50_000_000,
            "mem_fraction_static": 0.9,
        },
    )
    started = time.monotonic()
    with pytest.raises(ServerStartError) as info:
        launch(profile, tmp_path)
    err = info.value
    assert time.monotonic() - started < profile.ready_timeout_s  # failed at once, not by timeout
    assert err.death is not None and err.death.outcome == "oom"
    assert "no memory left for the KV cache" in err.death.reason
    assert "Not enough memory. Please try to increase --mem-fraction-static" in (err.death.log_line or "")
    assert any("Not enough memory" in line for line in err.tail)
    assert "oom" in str(err) and "server-main.log" in str(err)
