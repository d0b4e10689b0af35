"""servers.json in a run directory: every server process group the harness started there.

A record is written the moment a process starts (first start or relaunch, from any thread), so that a
later `recall-eval runs` or `sweep --resume` can find a server that outlived its harness (a guard that
was itself killed, a machine under memory pressure) and report it, or stop it on request.
Only what identifies the process is stored: name, pid/process group, port, start time. No argv and no
environment (they can hold keys).

A group is a leftover when a process of it is still alive and started no earlier than the record.
(A later, unrelated process group that happens to get the same id would also match: that needs a
new session or group leader with exactly the recorded pid, and `runs` shows what it would stop.)
"""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import psutil

from recall_eval.store import write_atomically

SERVERS_FILE = "servers.json"
_WRITE_LOCK = threading.Lock()  # one writer at a time within a harness (relaunches run on worker threads)


@dataclass(frozen=True)
class ServerRecord:
    name: str  # the process's name in its deployment ("main", "router", ...)
    pid: int  # the group leader's pid; also the process group id (start_new_session)
    port: int
    started_at: float  # time.time() just before the process was started
    harness_pid: int
    guard_pid: int | None = None


def load_records(run_dir: Path) -> list[ServerRecord]:
    try:
        data = json.loads((Path(run_dir) / SERVERS_FILE).read_text())
    except (OSError, ValueError):
        return []
    records = []
    for item in data.get("servers", []) if isinstance(data, dict) else []:
        try:
            records.append(ServerRecord(**item))
        except TypeError:
            continue
    return records


def add_record(run_dir: Path, record: ServerRecord) -> None:
    """Append a record (atomic rewrite: tmp + rename, so a reader never sees half a file)."""
    run_dir = Path(run_dir)
    with _WRITE_LOCK:
        records = [*load_records(run_dir), record]
        data = json.dumps({"servers": [asdict(r) for r in records]}, indent=1).encode("utf-8")
        write_atomically(run_dir / SERVERS_FILE, data)


def live_members(record: ServerRecord) -> list[psutil.Process]:
    """Processes still alive in the record's process group that started after the record was made."""
    try:
        os.killpg(record.pid, 0)  # no such group (the common case): no process scan needed
    except ProcessLookupError:
        return []
    except PermissionError:
        pass
    members = []
    for proc in psutil.process_iter(["status", "create_time"]):
        try:
            if proc.info["status"] == psutil.STATUS_ZOMBIE or os.getpgid(proc.pid) != record.pid:
                continue
        except (ProcessLookupError, PermissionError, psutil.Error):
            continue
        if proc.info["create_time"] is not None and proc.info["create_time"] >= record.started_at - 1.0:
            members.append(proc)
    return members


@dataclass(frozen=True)
class Leftover:
    record: ServerRecord
    pids: tuple[int, ...]

    def describe(self) -> str:
        return (
            f"server {self.record.name} (process group {self.record.pid}, port {self.record.port}, "
            f"{len(self.pids)} process{'es' if len(self.pids) != 1 else ''}) is still running"
        )


def find_leftovers(run_dir: Path, ignore_harness: int | None = None) -> list[Leftover]:
    """Recorded server groups that are still alive. ignore_harness: skip groups started by this
    (live) harness pid, i.e. the caller's own servers."""
    found = []
    for record in load_records(run_dir):
        if ignore_harness is not None and record.harness_pid == ignore_harness:
            continue
        members = live_members(record)
        if members:
            found.append(Leftover(record, tuple(proc.pid for proc in members)))
    return found


def stop_leftover(leftover: Leftover, grace_s: float = 10.0) -> bool:
    """SIGTERM the group, then SIGKILL after grace_s; True when nothing of it is left."""
    pgid = leftover.record.pid
    for signum, wait_s in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(pgid, signum)
        except ProcessLookupError:
            return True
        except PermissionError:
            return False
        deadline = time.monotonic() + wait_s
        while live_members(leftover.record) and time.monotonic() < deadline:
            time.sleep(0.1)
        if not live_members(leftover.record):
            return True
    return False
