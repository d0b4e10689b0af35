"""Nothing is left running when the harness ends: SIGTERM, SIGINT, plain exit (atexit) or SIGKILL."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from launchers.ports import free_port
from launchers.processes import group_members
from launchers.server_records import find_leftovers, load_records, stop_leftover
from tests.e2e.cli import cli_env

HARNESS = str(Path(__file__).with_name("harness_script.py"))


def start_harness(tmp_path: Path, how: str) -> tuple[subprocess.Popen[str], int]:
    proc = subprocess.Popen(
        [sys.executable, HARNESS, str(free_port()), str(tmp_path), how],
        stdout=subprocess.PIPE,
        text=True,
        env=cli_env(tmp_path),
    )
    assert proc.stdout is not None
    server_pid = int(proc.stdout.readline())
    return proc, server_pid


def gone(pid: int, timeout: float = 20.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        alive = psutil.pid_exists(pid) and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
        if not alive and not group_members(pid):
            return True
        time.sleep(0.1)
    return False


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_signal_to_the_harness_stops_the_server_group(tmp_path, signum):
    proc, server_pid = start_harness(tmp_path, "wait")
    try:
        assert psutil.pid_exists(server_pid)
        proc.send_signal(signum)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert gone(server_pid)


def test_exit_without_stop_is_cleaned_up_by_atexit(tmp_path):
    proc, server_pid = start_harness(tmp_path, "exit")
    assert proc.wait(timeout=30) == 0
    assert gone(server_pid)


def test_harness_killed_with_sigkill_takes_the_server_along(tmp_path):
    proc, server_pid = start_harness(tmp_path, "wait")
    proc.kill()  # no handler, no atexit: the server's parent-death signal must end it
    proc.wait(timeout=10)
    assert gone(server_pid)


@pytest.mark.parametrize("signum", [signal.SIGKILL, signal.SIGHUP])
def test_server_relaunched_on_an_ended_thread_dies_with_the_harness(tmp_path, signum):
    """The parent-death signal of a relaunch would follow its (ended) thread: the guard must act."""
    proc, first_pid = start_harness(tmp_path, "relaunch")
    assert proc.stdout is not None
    relaunched_pid = int(proc.stdout.readline())
    try:
        assert relaunched_pid != first_pid and gone(first_pid)
        time.sleep(0.5)
        assert psutil.pid_exists(relaunched_pid), "the relaunched server died with its thread"
        proc.send_signal(signum)
        proc.wait(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert gone(relaunched_pid, timeout=15.0)
    (leftover,) = [r for r in load_records(tmp_path) if r.pid == relaunched_pid]
    assert leftover.harness_pid == proc.pid and find_leftovers(tmp_path) == []


def test_a_leftover_is_found_and_stopped(tmp_path):
    """A relaunched server whose guard was killed too outlives the harness: servers.json finds it."""
    proc, _ = start_harness(tmp_path, "relaunch")
    assert proc.stdout is not None
    server_pid = int(proc.stdout.readline())
    try:
        (record,) = [r for r in load_records(tmp_path) if r.pid == server_pid]
        assert record.guard_pid is not None
        os.kill(record.guard_pid, signal.SIGKILL)
        proc.kill()
        proc.wait(timeout=10)
        time.sleep(1.0)
        (leftover,) = find_leftovers(tmp_path)
        assert leftover.record.pid == server_pid and server_pid in leftover.pids
        assert "still running" in leftover.describe()
        assert stop_leftover(leftover)
        assert find_leftovers(tmp_path) == []
    finally:
        if proc.poll() is None:
            proc.kill()
        if group_members(server_pid):
            os.killpg(server_pid, signal.SIGKILL)
