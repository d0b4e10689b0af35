"""servers.json evolves without losing a server: unknown fields kept, odd entries kept, and a file that
is not a server list moved aside (named, said once), never overwritten."""

from __future__ import annotations

import json
import logging
import os
import time

from launchers.server_records import SERVERS_FILE, ServerRecord, add_record, load_records


def _record(pid: int) -> ServerRecord:
    return ServerRecord(name="main", pid=pid, port=30000, started_at=time.time(), harness_pid=os.getpid())


def test_a_corrupt_servers_json_is_moved_aside_and_said_once(tmp_path, caplog):
    (tmp_path / SERVERS_FILE).write_text('{"servers": [{"name": "main", "pid": 4242')  # cut mid-write
    with caplog.at_level(logging.WARNING, logger="recall_eval"):
        assert load_records(tmp_path) == []
        add_record(tmp_path, _record(77))
        assert [r.pid for r in load_records(tmp_path)] == [77]
    [aside] = tmp_path.glob(f"{SERVERS_FILE}.corrupt-*")
    assert aside.read_text() == '{"servers": [{"name": "main", "pid": 4242'  # what it said is kept
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and aside.name in warnings[0] and "not JSON" in warnings[0]


def test_fields_and_entries_it_does_not_know_are_kept_when_a_record_is_added(tmp_path):
    future = {**_record(11).to_json(), "container_id": "abc"}
    document = {"format": 2, "servers": [future, {"kind": "remote", "url": "http://x"}]}
    (tmp_path / SERVERS_FILE).write_text(json.dumps(document))
    [known] = load_records(tmp_path)
    assert known.pid == 11 and known.unknown == {"container_id": "abc"}
    add_record(tmp_path, _record(12))
    written = json.loads((tmp_path / SERVERS_FILE).read_text())
    assert written["format"] == 2
    assert {"kind": "remote", "url": "http://x"} in written["servers"]
    assert [s.get("container_id") for s in written["servers"] if "pid" in s] == ["abc", None]
    assert [r.pid for r in load_records(tmp_path)] == [11, 12]
