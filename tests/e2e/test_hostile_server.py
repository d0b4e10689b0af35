"""A sweep against a server that misbehaves in every way tests/e2e/hostile_server.py knows: the sweep
finishes, every case has a classified outcome with an excerpt, nothing is lost, nothing hangs past
the idle limit, and the report escapes the <script> answer."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import httpx
import pytest

from recall_eval.store import load_run
from tests.e2e.cli import run_cli
from tests.e2e.hostile_server import BEHAVIOURS
from tests.e2e.served_process import free_port, start_served

SERVER = Path(__file__).with_name("hostile_server.py")
REQUEST_TIMEOUT_S = 15  # the idle limit is a fifth of it: 3 s


@pytest.fixture
def hostile(tmp_path):
    port = free_port()
    server = start_served([sys.executable, str(SERVER), str(port)], tmp_path / "hostile.log", port)
    yield server
    server.stop()


@pytest.mark.parametrize("reader", ["event-stream connections", "httpx"])
def test_sweep_survives_every_hostile_behaviour(hostile, tmp_path, monkeypatch, reader):
    """Both readers of streamed answers (recall_eval.stream_connection, and httpx where a proxy is
    set or RECALL_EVAL_HTTP=httpx) meet every misbehaviour with the same outcomes."""
    monkeypatch.setenv("RECALL_EVAL_HTTP", "httpx" if reader == "httpx" else "")
    out = tmp_path / "run"
    completed = run_cli(
        "sweep", "--base-url", hostile.base_url, "--lengths", "200,300", "--depths", "0..100:4", "--trials", "2",
        "--request-timeout", str(REQUEST_TIMEOUT_S), "--out", str(out),
    )  # fmt: skip
    assert "Traceback" not in completed.stderr, completed.stderr
    (run_dir,) = out.iterdir()  # --out DIR creates the run inside DIR
    run, results = load_run(run_dir)
    assert run.status == "finished", (run.note, completed.stderr)
    assert len(results) == 16 and len({r.case_id for r in results}) == 16  # nothing lost, nothing twice

    assigned = httpx.get(f"{hostile.base_url}/behaviours").json()
    assert sorted(set(assigned.values()) - {"normal"}) == sorted(BEHAVIOURS)
    by_behaviour = {assigned[r.expected[0]]: r for r in results if r.expected[0] in assigned}
    expected_outcomes = {
        "script": "miss",
        "surrogate": "pass",
        "bad_utf8": "pass",
        "malformed_json": "error",
        "not_json": "error",
        "drop": "error",
        "e500": "error",
        "e503": "error",
        "e429_then_ok": "pass",
        "megabytes": "error",
        "stall": "timeout",
        "error_event": "error",
        "normal": "pass",
    }
    got = {name: result.outcome for name, result in by_behaviour.items()}
    assert got == {name: expected_outcomes[name] for name in got}, got

    def detail(name: str) -> str:
        return by_behaviour[name].error or ""

    surrogate = by_behaviour["surrogate"].answer
    assert "\ufffd" in surrogate and "\udcff" not in surrogate  # replaced, not stored as a lone surrogate
    assert "\ufffd" in by_behaviour["bad_utf8"].answer
    assert "malformed stream event" in detail("malformed_json") and "The code" in detail("malformed_json")
    assert "not an event stream" in detail("not_json") and "Bad Gateway" in detail("not_json")
    assert "The co" in detail("drop")
    assert "HTTP 500" in detail("e500") and "after 1 attempts" in detail("e500")  # not retried
    assert "HTTP 503" in detail("e503") and "after 4 attempts" in detail("e503")  # bounded retries
    assert "65,536 characters" in detail("megabytes") and len(by_behaviour["megabytes"].answer) == 65_536
    assert "no data within 3s" in detail("stall")
    assert "Generation aborted" in detail("error_event")

    stored = (run_dir / "results.jsonl").read_text(encoding="utf-8")
    assert all(json.loads(line) for line in stored.splitlines())  # every line is valid JSON (UTF-8)
    report = (run_dir / "report.html").read_text(encoding="utf-8")
    assert "<script>alert('owned')</script>" not in report
    assert "&lt;script&gt;alert(" in report
