"""servers.json in a run directory: every server process group the harness started there.

A record is written the moment a process starts (first start or relaunch, from any thread), so that a
later `recall-eval runs` or `sweep --resume` can find a server that outlived its harness (a guard that
was itself killed, a machine under memory pressure) and report it, or stop it on request.
Only what identifies the process is stored: name, pid/process group, port, start time. No argv and no
environment (they can hold keys).

The file evolves like the run's other stored files: a field a record does not know (a newer
recall-eval's) is kept and written back, an entry that is not a record is kept as it is, and a file that
is not JSON at all is moved aside (servers.json.corrupt-<time>, said once on the `recall_eval` logger),
never overwritten: it may name a server still running.

A group is a leftover when a process of it is still alive and started no earlier than the record.
(A later, unrelated process group that happens to get the same id would also match: that needs a
new session or group leader with exactly the recorded pid, and `runs` shows what it would stop.)
"""

from __future__ import annotations

import json
import logging
import os
import signal
import threading
import time
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

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
    # fields this recall-eval does not know (written by a newer one): kept, written back
    unknown: dict[str, Any] = field(default_factory=dict, compare=False)

    @classmethod
    def from_json(cls, item: dict[str, Any]) -> ServerRecord:
        """TypeError for an entry that lacks a field a record needs."""
        known = {f.name for f in fields(cls)} - {"unknown"}
        return cls(
            **{k: v for k, v in item.items() if k in known},
            unknown={k: v for k, v in item.items() if k not in known},
        )

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        return {**data.pop("unknown"), **data}


def _set_aside(path: Path, why: str) -> None:
    """Move a servers.json that cannot be read out of the way, named, and say so once."""
    aside = path.with_name(f"{path.name}.corrupt-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}")
    try:
        os.replace(path, aside)
    except OSError:
        return  # another reader moved it first (and said so)
    logging.getLogger("recall_eval").warning(
        "%s is not a server list (%s); moved aside to %s: look there for servers it may name",
        path,
        why,
        aside.name,
    )


@dataclass
class _Stored:
    records: list[ServerRecord]
    others: list[Any]  # entries that are not records: kept as they are
    document: dict[str, Any]  # the rest of the file (keys a newer recall-eval wrote): kept


def _read(run_dir: Path) -> _Stored:
    path = Path(run_dir) / SERVERS_FILE
    try:
        raw = path.read_bytes()
    except OSError:
        return _Stored([], [], {})
    try:
        data = json.loads(raw)
    except ValueError as err:
        _set_aside(path, f"not JSON: {err}")
        return _Stored([], [], {})
    items = data.get("servers") if isinstance(data, dict) else None
    if not isinstance(items, list):
        _set_aside(path, "no list of servers in it")
        return _Stored([], [], {})
    stored = _Stored([], [], {k: v for k, v in data.items() if k != "servers"})
    for item in items:
        try:
            stored.records.append(ServerRecord.from_json(item))
        except (TypeError, AttributeError):
            stored.others.append(item)
    return stored


def load_records(run_dir: Path) -> list[ServerRecord]:
    return _read(run_dir).records


def add_record(run_dir: Path, record: ServerRecord) -> None:
    """Append a record (atomic rewrite: tmp + rename, so a reader never sees half a file)."""
    run_dir = Path(run_dir)
    with _WRITE_LOCK:
        stored = _read(run_dir)
        servers = [*stored.others, *(r.to_json() for r in [*stored.records, record])]
        data = {**stored.document, "servers": servers}
        write_atomically(run_dir / SERVERS_FILE, json.dumps(data, indent=1).encode("utf-8"))


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
