"""End to end with the real reference engine, launched through its profile:
- `recall-eval sweep` whose server is killed with SIGKILL mid-sweep: the cases in flight are recorded
  as crash, the server is relaunched, the run finishes with every case exactly once;
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
from recall_eval.store import load_run
from tests.launchers.cli_helpers import start_cli

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
    sweep = start_cli(args, tmp_path / "home", tmp_path)
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
    assert reference_server_pid(sweep.pid) is None if psutil.pid_exists(sweep.pid) else True
    assert not psutil.pid_exists(killed_pid) or psutil.Process(killed_pid).status() == psutil.STATUS_ZOMBIE


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
