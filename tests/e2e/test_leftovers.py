"""A server that outlived its harness (its guard killed too): `runs` lists it, `sweep --resume` refuses
until --stop-leftovers, `runs --stop-leftovers` stops it. The leftover is a real process group
recorded in servers.json as the harness records its servers."""

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

from launchers.server_records import ServerRecord, add_record, live_members
from recall_eval.store import RunStore
from recall_eval.types import Profile, Run, RunSpec
from tests.e2e.cli import run_cli


@pytest.fixture
def leftover_run(tmp_path):
    home = Path(os.environ["RECALL_EVAL_HOME"])
    run = Run(
        run_id="r1",
        spec=RunSpec(lengths=(400,), depths=(50.0,), trials=1),
        profile=Profile(name="reference", engine="reference", port=0),
        status="interrupted",
        created_at=time.time(),
    )
    store = RunStore.create(run, home)
    dead_harness = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True
    )
    started = time.time()
    server = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"], start_new_session=True)
    record = ServerRecord(
        name="main", pid=server.pid, port=31999, started_at=started, harness_pid=int(dead_harness.stdout)
    )
    add_record(store.path, record)
    yield store, record
    if live_members(record):
        os.killpg(server.pid, signal.SIGKILL)
    server.wait()


def test_runs_reports_then_stops_a_leftover(leftover_run):
    store, record = leftover_run
    listed = run_cli("runs")
    assert listed.returncode == 0, listed.stderr
    assert (
        f"leftover: run r1: server main (process group {record.pid}, port 31999, 1 process) is still running"
        in (listed.stdout.replace("\n", " "))
    )
    payload = json.loads(run_cli("runs", "--json").stdout)
    (entry,) = payload["runs"]
    assert entry["leftover_servers"] == [
        {"name": "main", "process_group": record.pid, "port": 31999, "pids": [record.pid]}
    ]
    refused = run_cli("sweep", "--resume", str(store.path))
    assert refused.returncode == 1
    assert (
        "add --stop-leftovers to stop it" in refused.stderr
        and f"kill -TERM -- -{record.pid}" in refused.stderr
    )
    assert live_members(record)  # refused: nothing was touched
    stopped = run_cli("runs", "--stop-leftovers")
    assert stopped.returncode == 0 and "stopped: run r1: server main" in stopped.stdout
    assert not live_members(record)
    assert "leftover" not in run_cli("runs").stdout
    assert not psutil.pid_exists(record.pid) or psutil.Process(record.pid).status() == psutil.STATUS_ZOMBIE
