"""`recall-eval compare A B --base-url U1 --base-url U2` end to end against two real (tiny) servers.

The tiny servers are real HTTP processes (tests/recall_eval/tiny_server.py) that answer with the code
in the prompt; the reference-engine compare is in test_compare_reference.py.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from recall_eval.store import runs_home

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
TINY_SERVER = REPO / "tests" / "recall_eval" / "tiny_server.py"
GRID = ["--lengths", "300,800", "--depths", "0,100", "--trials", "2"]


def recall_eval(*args: str, timeout: float = 240) -> subprocess.CompletedProcess[str]:
    """Run the CLI as a user would (a new process), with this test's run store."""
    env = {**os.environ, "PYTHONPATH": f"{REPO}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    argv = [sys.executable, "-c", "from recall_eval.cli import main; main()", *args]
    return subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True, timeout=timeout)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture
def two_servers() -> Iterator[list[str]]:
    procs, urls = [], []
    try:
        for _ in range(2):
            port = free_port()
            procs.append(
                subprocess.Popen([sys.executable, str(TINY_SERVER), str(port)], start_new_session=True)
            )
            urls.append(f"http://127.0.0.1:{port}")
        for url in urls:
            deadline = time.monotonic() + 30
            while True:
                try:
                    if httpx.get(f"{url}/v1/models", timeout=1).status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                assert time.monotonic() < deadline, f"tiny server at {url} did not start"
                time.sleep(0.1)
        yield urls
    finally:
        for proc in procs:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=10)


def run_dirs() -> list[Path]:
    return sorted(p for p in runs_home().iterdir() if (p / "run.json").is_file())


def snapshot(dirs: list[Path]) -> dict[str, bytes]:
    return {
        f"{d.name}/{name}": (d / name).read_bytes() for d in dirs for name in ("run.json", "results.jsonl")
    }


def test_compare_running_servers_then_rerun_reuses(two_servers: list[str]) -> None:
    url_a, url_b = two_servers
    first = recall_eval("compare", "A", "B", "--base-url", url_a, "--base-url", url_b, *GRID)
    assert first.returncode == 0, first.stderr
    html = Path(first.stdout.strip().splitlines()[-1])
    assert html.name == "compare.html" and html.is_file()
    compare = json.loads((html.parent / "compare.json").read_text())
    assert [v["label"] for v in compare["variants"]] == ["A", "B"]
    assert [v["reused"] for v in compare["variants"]] == [False, False]
    dirs = run_dirs()
    assert len(dirs) == 2
    stored = {json.loads((d / "run.json").read_text())["profile"]["base_url"]: d for d in dirs}
    assert set(stored) == {url_a, url_b}
    # Identical cases under both variants: the same case ids.
    ids = [
        {json.loads(line)["case_id"] for line in (d / "results.jsonl").read_text().splitlines()} for d in dirs
    ]
    assert ids[0] == ids[1] and len(ids[0]) == 2 * 2 * 2
    pair = compare["numbers"]["pairs"][0]["overall"]
    assert pair["paired"] + pair["excluded_infra"] == 8 and pair["unpaired"] == 0

    before = snapshot(dirs)
    second = recall_eval("compare", "A", "B", "--base-url", url_a, "--base-url", url_b, *GRID)
    assert second.returncode == 0, second.stderr
    assert Path(second.stdout.strip().splitlines()[-1]) == html
    for label, url in (("A", url_a), ("B", url_b)):
        assert f"{label}: reusing run {stored[url].name}" in second.stderr
    assert run_dirs() == dirs and snapshot(dirs) == before
    again = json.loads((html.parent / "compare.json").read_text())
    assert again["rendered_at"] > compare["rendered_at"]
    assert [v["reused"] for v in again["variants"]] == [True, True]
    assert again["numbers"] == compare["numbers"]

    # `recall-eval report` re-renders a compare directory from its manifest, with no server.
    html.unlink()
    rendered = recall_eval("report", str(html.parent))
    assert rendered.returncode == 0, rendered.stderr
    assert Path(rendered.stdout.strip().splitlines()[-1]) == html and html.is_file()
    assert json.loads((html.parent / "compare.json").read_text())["numbers"] == compare["numbers"]


def test_base_url_count_must_match_variants(two_servers: list[str]) -> None:
    done = recall_eval("compare", "A", "B", "--base-url", two_servers[0], *GRID)
    assert done.returncode == 2
    assert done.stderr.strip() == "error: give --base-url once per variant: 2 variants, 1 --base-url"
    assert not runs_home().exists() or not run_dirs()


def test_unreachable_base_url_is_one_line_and_leaves_no_run() -> None:
    dead = f"http://127.0.0.1:{free_port()}"
    done = recall_eval("compare", "A", "B", "--base-url", dead, "--base-url", dead, *GRID)
    assert done.returncode == 1
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: cannot reach {dead}"), done.stderr
    assert not runs_home().exists() or not run_dirs()


def test_bad_variant_spec_fails_before_any_launch() -> None:
    done = recall_eval("compare", "fp8", "topk=abc", *GRID)
    assert done.returncode == 2
    assert done.stderr.strip() == "error: variant 'topk=abc': topk=abc: topk is a whole number >= 1"
    assert not runs_home().exists() or not run_dirs()


def test_interrupted_variant_is_resumed_not_rerun(two_servers: list[str]) -> None:
    url_a, url_b = two_servers
    args = ("compare", "A", "B", "--base-url", url_a, "--base-url", url_b, *GRID)
    assert recall_eval(*args).returncode == 0
    dirs = run_dirs()
    run_b = next(d for d in dirs if json.loads((d / "run.json").read_text())["profile"]["base_url"] == url_b)
    # As if B had been stopped by Ctrl-C after three cases.
    run = json.loads((run_b / "run.json").read_text())
    (run_b / "run.json").write_text(json.dumps({**run, "status": "interrupted", "finished_at": None}))
    lines = (run_b / "results.jsonl").read_text().splitlines(keepends=True)
    (run_b / "results.jsonl").write_text("".join(lines[:3]))

    done = recall_eval(*args)
    assert done.returncode == 0, done.stderr
    assert "A: reusing run" in done.stderr and f"B: resuming run {run_b.name}" in done.stderr
    assert run_dirs() == dirs
    case_ids = [json.loads(line)["case_id"] for line in (run_b / "results.jsonl").read_text().splitlines()]
    assert len(case_ids) == len(set(case_ids)) == len(lines)
    assert [json.loads(line)["case_id"] for line in lines[:3]] == case_ids[:3]  # kept, not redone
    assert json.loads((run_b / "run.json").read_text())["status"] == "finished"
