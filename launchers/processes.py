"""One server process in its own process group: start with output to a log, stop by group, never by name.

Each start also starts a guard (launchers/watchdog.py) that stops the group if the harness dies, from
whatever thread the start ran on, and records the group in the run directory's servers.json. The
server's output reaches its log through launchers/log_mask.py, which masks secrets as lines are written.
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import psutil

from launchers import watchdog
from launchers.argv.spec import LaunchSpec
from launchers.log_mask import MaskedLog, launch_secrets
from launchers.server_records import ServerRecord, add_record

_PR_SET_PDEATHSIG = 1
TAIL_BYTES = 256 * 1024
GUARD_GRACE_S = 5.0  # SIGTERM -> SIGKILL once the harness is gone


def _die_with_parent() -> None:
    """Runs in the child before exec: SIGTERM it if the launching thread dies (e.g. harness killed -9)."""
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
    except OSError:
        pass


def group_members(pgid: int) -> list[psutil.Process]:
    """Live (non-zombie) processes of a process group."""
    members = []
    for proc in psutil.process_iter(["status"]):
        try:
            if os.getpgid(proc.pid) == pgid and proc.info["status"] != psutil.STATUS_ZOMBIE:
                members.append(proc)
        except (ProcessLookupError, PermissionError, psutil.Error):
            continue
    return members


SecretsOf = Callable[[Sequence[str], Mapping[str, str]], list[str]]


class ServerProcess:
    """A started LaunchSpec. Its log is appended to, each start marked with a header line."""

    def __init__(self, spec: LaunchSpec, log_path: Path, secrets: SecretsOf = launch_secrets):
        self.spec = spec
        self.log_path = log_path
        self.secrets = secrets  # the values its log must mask, from argv and environment (its kind's)
        self.popen: subprocess.Popen[bytes] | None = None
        self.log_offset = 0  # where this start's output begins in the log
        self.served_offset = 0  # the log's size when the server last answered a request
        self.started_at = 0.0
        self.guard: subprocess.Popen[bytes] | None = None
        self.masked_log: MaskedLog | None = None  # writes the server's output, masked, to the log

    @property
    def pid(self) -> int | None:
        return self.popen.pid if self.popen is not None else None

    def start(self, header: str) -> None:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "ab") as log:
            log.write(f"===== recall-eval: {header} =====\n{self.spec.command_line()}\n".encode())
            log.flush()
            self.log_offset = log.tell()
            on_main_thread = threading.current_thread() is threading.main_thread()
            self.started_at = time.monotonic()
            wall_start = time.time()
        env = self.spec.merged_env()
        self.popen = subprocess.Popen(
            list(self.spec.argv),
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own session and process group: stopped as a group
            # PDEATHSIG follows the launching *thread*; only the main thread lives as long as we do.
            preexec_fn=_die_with_parent if on_main_thread else None,
        )
        assert self.popen.stdout is not None
        pipe = os.dup(self.popen.stdout.fileno())  # MaskedLog owns (and closes) this one
        self.popen.stdout.close()
        self.masked_log = MaskedLog(pipe, self.log_path, self.secrets(self.spec.argv, env))
        self.guard = _start_guard(self.popen.pid)
        add_record(
            self.log_path.parent,
            ServerRecord(
                name=self.spec.name,
                pid=self.popen.pid,
                port=self.spec.port,
                started_at=wall_start,
                harness_pid=os.getpid(),
                guard_pid=self.guard.pid if self.guard is not None else None,
            ),
        )

    def mark_served(self) -> None:
        """The server just answered: log lines before here do not explain a later death (lines still
        on their way to the log included: launchers.log_mask)."""
        if self.masked_log is not None:
            offset = self.masked_log.mark_served()
            if offset is not None:
                self.served_offset = offset
            return
        try:
            self.served_offset = os.path.getsize(self.log_path)
        except OSError:
            pass

    def exit_code(self) -> int | None:
        code = self.popen.poll() if self.popen is not None else None
        if code is not None:
            self.wait_log()
        return code

    def wait_log(self, timeout_s: float = 5.0) -> None:
        """Wait (briefly) until everything the exited server printed is in its log."""
        if self.masked_log is not None:
            self.masked_log.wait(timeout_s)

    def alive_members(self) -> list[psutil.Process]:
        if self.popen is None:
            return []
        self.popen.poll()  # reap the leader if it exited, so it does not count as a zombie member
        return group_members(self.popen.pid)

    def log_lines(self) -> list[str]:
        """The log written since this start or since the server last answered, whichever is later
        (at most its last TAIL_BYTES): what explains a death, and nothing older."""
        try:
            with open(self.log_path, "rb") as log:
                size = log.seek(0, os.SEEK_END)
                served = self.masked_log.served_offset() if self.masked_log is not None else None
                served = max(self.served_offset, served or 0)
                log.seek(max(self.log_offset, served, size - TAIL_BYTES))
                data = log.read()
        except OSError:
            return []
        return data.decode("utf-8", errors="replace").splitlines(keepends=True)

    def _signal_group(self, signum: int) -> None:
        assert self.popen is not None
        try:
            os.killpg(self.popen.pid, signum)
        except (ProcessLookupError, PermissionError):
            pass

    def kill_group_now(self) -> None:
        """SIGKILL whatever is left of the group, without waiting (after the leader died)."""
        if self.popen is not None and self.alive_members():
            self._signal_group(signal.SIGKILL)

    def stop(self, grace_s: float = 15.0) -> None:
        """SIGTERM the group, wait up to grace_s, then SIGKILL it; returns when nothing of it is left."""
        if self.popen is None:
            return
        if self.alive_members():
            self._signal_group(signal.SIGTERM)
            self._signal_group(
                signal.SIGCONT
            )  # a frozen (SIGSTOPped) server handles SIGTERM now, not at SIGKILL
            deadline = time.monotonic() + grace_s
            while self.alive_members() and time.monotonic() < deadline:
                time.sleep(0.1)
        if self.alive_members():
            self._signal_group(signal.SIGKILL)
            deadline = time.monotonic() + 10.0
            while self.alive_members() and time.monotonic() < deadline:
                time.sleep(0.05)
        try:
            self.popen.wait(timeout=5.0)
        except subprocess.TimeoutExpired:
            pass
        self.wait_log()
        self._reap_guard()

    def _reap_guard(self) -> None:
        """The guard leaves by itself once the group is empty; wait for it (no zombie left behind)."""
        if self.guard is None:
            return
        try:
            self.guard.wait(timeout=2.0)
        except subprocess.TimeoutExpired:
            self.guard.kill()
            self.guard.wait()


def _start_guard(pgid: int) -> subprocess.Popen[bytes] | None:
    """Start the guard of one process group: isolated (-I -S) stdlib-only Python, its own session."""
    try:
        return subprocess.Popen(
            [sys.executable, "-I", "-S", watchdog.__file__, str(os.getpid()), str(pgid), str(GUARD_GRACE_S)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
    except OSError:
        return None  # no guard: the parent-death signal (main thread) and atexit still apply
