"""`recall-eval runs` as people read it: a run whose harness was killed (SIGKILL: no chance to write
run.json) is shown as `interrupted (no process)`, not `running` for ever; the table is readable at
100 columns (no cell cut to `fi…`); the ids it prints are accepted by report and export."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from recall_eval.store import load_run
from recall_eval.types import Run
from tests.e2e.cli import cli_argv, cli_env, run_cli
from tests.e2e.served_process import free_port, start_served

SERVER = Path(__file__).with_name("gateway_server.py")


@pytest.fixture
def slow_server(tmp_path):
    port = free_port()
    argv = [sys.executable, str(SERVER), str(port), "--answer-delay", "120"]  # the run is killed first
    server = start_served(argv, tmp_path / "slow.log", port, ready_path="/ready")
    yield server
    server.stop()


def _wait_for_owner(home: Path, timeout_s: float = 240) -> Path:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for run_file in home.glob("*/run.json"):
            run = Run.model_validate_json(run_file.read_text())
            if run.owner is not None and run.cases_planned is not None and run.server_info:
                return run_file.parent  # probed, about to send (or sending) its cases
        time.sleep(0.2)
    raise AssertionError(f"no run with an owner under {home}")


def test_a_killed_harness_leaves_its_run_interrupted_not_running(slow_server, tmp_path):
    """SIGKILL mid-run: run.json still says running, but its owner (pid + start time) is gone, so `runs`
    shows `interrupted (no process)` (table and --json); a live harness's run stays `running`, and a
    second process may not resume it meanwhile."""
    home = tmp_path / "runs"
    argv = cli_argv(
        "sweep", "--base-url", slow_server.base_url, "--lengths", "200", "--depths", "0..100:6",
        "--trials", "1", "--no-report",
    )  # fmt: skip
    harness = subprocess.Popen(
        argv, env=cli_env(home), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
    )
    try:
        run_dir = _wait_for_owner(home)
        live = json.loads(run_cli("runs", "--json", home=home).stdout)["runs"][0]
        assert live["status"] == live["status_now"] == "running", live
        second = run_cli("sweep", "--resume", str(run_dir), home=home)  # two writers of one run: refused
        assert second.returncode == 1 and f"still running (pid {harness.pid})" in second.stderr, second.stderr
        harness.send_signal(signal.SIGKILL)
        harness.wait(timeout=30)
    finally:
        if harness.poll() is None:
            harness.kill()
    run, _ = load_run(run_dir)
    assert run.status == "running" and run.owner is not None and run.owner.pid == harness.pid
    listed = json.loads(run_cli("runs", "--json", home=home).stdout)["runs"][0]
    assert listed["status"] == "running" and listed["status_now"] == "interrupted (no process)", listed
    table = run_cli("runs", home=home).stdout
    row = [line for line in table.splitlines() if run.run_id in line][0]
    assert "interrupted (no process)" in row and "running" not in row, table


def test_runs_fits_100_columns_and_its_ids_work_in_report_and_export(tmp_path):
    """At 100 columns every cell is whole (words wrap, nothing is cut with …) and no line is wider;
    `report ID` and `export ID` take the id the table prints, as well as the path."""
    home = tmp_path / "runs"
    sample = run_cli(
        "sweep", "--lengths", "338..2000:3", "--depths", "0,100", "--trials", "1", "--suite", "needle,config",
        home=home, timeout=600,
    )  # fmt: skip
    assert sample.returncode == 0, sample.stderr
    (run_dir,) = home.iterdir()
    completed = subprocess.run(
        cli_argv("runs"), capture_output=True, text=True, env={**cli_env(home), "COLUMNS": "100"}, timeout=120
    )
    assert completed.returncode == 0, completed.stderr
    lines = completed.stdout.splitlines()
    assert max(len(line) for line in lines) <= 100, completed.stdout
    assert "…" not in completed.stdout, completed.stdout
    text = completed.stdout.split()
    for word in (run_dir.name, "finished", "default", "reference", "needle,", "config", "(12/12)"):
        assert word in text, (word, completed.stdout)

    rendered = run_cli("report", run_dir.name, home=home)
    assert rendered.returncode == 0, rendered.stderr
    assert Path(rendered.stdout.splitlines()[0]).resolve() == (run_dir / "report.html").resolve()
    exported = run_cli("export", run_dir.name, home=home)
    assert exported.returncode == 0, exported.stderr
    assert exported.stdout.count("\n") == 1 + 6 * 2  # the header, then 2 suites x 3 lengths x 2 depths
