"""`recall-eval compare A B --base-url U1 --base-url U2` end to end against two real servers.

The tiny servers are real HTTP processes (tests/recall_eval/tiny_server.py) that answer with the code
in the prompt; the interleaving test runs two real reference engine servers; the compare that launches
the reference engine is in test_compare_reference.py.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from launchers.ports import free_port
from recall_eval.store import runs_home
from tests.e2e.cli import run_cli
from tests.e2e.reference_server import ReferenceServer
from tests.reports.dom import parse

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
TINY_SERVER = REPO / "tests" / "recall_eval" / "tiny_server.py"
GRID = ["--lengths", "300,800", "--depths", "0,100", "--trials", "2"]


def recall_eval(*args: str, timeout: float = 240) -> subprocess.CompletedProcess[str]:
    """Run the CLI as a user would (a new process), with this test's run store."""
    return run_cli(*args, timeout=timeout)


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
    assert compare["interleaved"] is True  # both servers live at once: requests interleaved
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
    # the console states the paired recall result: flips each way and the exact McNemar p-value
    assert (
        f"B vs A: {pair['miss_to_pass']} flipped miss→pass, {pair['pass_to_miss']} pass→miss of "
        f"{pair['paired']} paired cases, exact McNemar p = "
    ) in first.stderr

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
    assert set(again["reused_age_s"]) == {"A", "B"} and "run reused, finished" in again["verdict"]
    assert again["numbers"] == compare["numbers"]
    assert again["interleaved"] is True  # the same two runs this compare interleaved before

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
    resumed = json.loads((run_b / "run.json").read_text())
    assert resumed["status"] == "finished"
    # B's last cases ran alone (A was reused): neither B nor the compare may claim interleaving.
    assert resumed["interleaved"] is False
    html = Path(done.stdout.strip().splitlines()[-1])
    assert json.loads((html.parent / "compare.json").read_text())["interleaved"] is False
    assert parse(html.read_text()).by_id("throughput-order").attrs["data-interleaved"] == "false"


@pytest.fixture
def two_reference_servers(tmp_path: Path) -> Iterator[list[str]]:
    servers: list[ReferenceServer] = []
    try:
        for name in ("a", "b"):
            servers.append(ReferenceServer(tmp_path / f"server-{name}.log"))
        yield [server.base_url for server in servers]
    finally:
        for server in servers:
            server.stop()


def results_of(run_dir: Path) -> list[dict]:
    path = run_dir / "results.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.is_file() else []


def stored_runs() -> list[Path]:
    return run_dirs() if runs_home().is_dir() else []


def test_live_servers_take_turns_case_by_case(two_reference_servers: list[str]) -> None:
    url_a, url_b = two_reference_servers
    grid = ["--lengths", "338,700", "--depths", "0,100", "--trials", "2", "--max-tokens", "4"]
    done = recall_eval("compare", "A", "B", "--base-url", url_a, "--base-url", url_b, *grid, timeout=420)
    assert done.returncode == 0, done.stderr[-3000:]
    html = Path(done.stdout.strip().splitlines()[-1])
    compare = json.loads((html.parent / "compare.json").read_text())
    assert compare["interleaved"] is True
    dirs = [(html.parent / v["run_dir"]).resolve() for v in compare["variants"]]
    runs = [json.loads((d / "run.json").read_text()) for d in dirs]
    assert [run["profile"]["base_url"] for run in runs] == [url_a, url_b]
    assert [(run["status"], run["interleaved"]) for run in runs] == [("finished", True)] * 2

    # Requests started in turn, A1 B1 A2 B2 ..., each pair on the same case.
    a, b = (results_of(d) for d in dirs)
    assert len(a) == len(b) == 2 * 2 * 2
    starts = sorted([(r["started_at"], "A", r) for r in a] + [(r["started_at"], "B", r) for r in b])
    assert [label for _, label, _ in starts] == ["A", "B"] * len(a)
    for (_, _, first), (_, _, second) in zip(starts[::2], starts[1::2], strict=True):
        assert first["case_id"] == second["case_id"]
        assert first["started_at"] < second["started_at"]
    for (_, _, earlier), (_, _, later) in zip(starts[::2], starts[2::2], strict=False):
        assert earlier["finished_at"] <= later["started_at"]  # one request in flight per server

    # The report tests the speeds as pairs: the sign test is shown.
    dom = parse(html.read_text())
    assert dom.by_id("throughput-order").attrs["data-interleaved"] == "true"
    ttft = dom.by_id("throughput-compare").find_all("tr", data_metric="ttft_s")[0]
    sign = ttft.find_all("td", cls="sign-test")[0].attrs
    assert int(sign["data-better"]) + int(sign["data-worse"]) > 0 and 0.0 <= float(sign["data-p"]) <= 1.0
    assert compare["numbers"]["pairs"][0]["interleaved"] is True
    # ... and the verdict states the speed change of interleaved runs with its sign test, never "sequential"
    assert (
        "interleaved runs, per-case median change: TTFT " in compare["verdict"]
        and "sign test p" in compare["verdict"]
    )
    assert "sequential runs" not in compare["verdict"]


def test_ctrl_c_interrupts_both_runs_and_a_rerun_resumes_them_interleaved(
    two_reference_servers: list[str],
) -> None:
    url_a, url_b = two_reference_servers
    grid = ["--lengths", "338,700,1000", "--depths", "0,50,100", "--trials", "2", "--max-tokens", "4"]
    args = ("compare", "A", "B", "--base-url", url_a, "--base-url", url_b, *grid)
    env = {**os.environ, "PYTHONPATH": f"{REPO}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    argv = [sys.executable, "-c", "from recall_eval.cli import main; main()", *args]
    proc = subprocess.Popen(
        argv, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        deadline = time.monotonic() + 240
        while not (len(dirs := stored_runs()) == 2 and min(len(results_of(d)) for d in dirs) >= 2):
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "no results within 240 s"
            time.sleep(0.05)
        proc.send_signal(signal.SIGINT)
        _, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130, stderr[-3000:]
    assert "interrupted in variant A" in stderr
    urls = [url_a, url_b]
    dirs.sort(key=lambda d: urls.index(json.loads((d / "run.json").read_text())["profile"]["base_url"]))
    for run_dir in dirs:
        run = json.loads((run_dir / "run.json").read_text())
        assert (run["status"], run["note"], run["interleaved"]) == ("interrupted", "stopped by Ctrl-C", True)
    cut = {d: len(results_of(d)) for d in dirs}
    assert all(0 < count < 18 for count in cut.values())

    done = recall_eval(*args, timeout=420)
    assert done.returncode == 0, done.stderr[-3000:]
    for label, run_dir in zip(("A", "B"), dirs, strict=True):
        assert f"{label}: resuming run {run_dir.name}" in done.stderr
        run = json.loads((run_dir / "run.json").read_text())
        assert (run["status"], run["interleaved"]) == ("finished", True)
        case_ids = [r["case_id"] for r in results_of(run_dir)]
        assert len(case_ids) == len(set(case_ids)) == 18  # the cases stored before were not sent again
    assert run_dirs() == sorted(dirs)  # no third run: the rerun resumed both (dirs is in variant order)
    html = Path(done.stdout.strip().splitlines()[-1])
    assert json.loads((html.parent / "compare.json").read_text())["interleaved"] is True


def test_a_variant_that_fails_stops_the_other_and_each_run_says_how_it_ended(
    two_servers: list[str],
) -> None:
    # --capture-indexer needs SGLang's /generate, which the tiny server lacks: variant A fails while it
    # is prepared, so B, which would have run beside it, stops too.
    url_a, url_b = two_servers
    args = ("compare", "A", "B", "--base-url", url_a, "--base-url", url_b, "--capture-indexer", *GRID)
    done = recall_eval(*args)
    assert done.returncode == 1, done.stderr
    assert done.stderr.strip().splitlines()[-1].startswith("error: variant 'A': "), done.stderr
    runs = {(run := json.loads((d / "run.json").read_text()))["profile"]["base_url"]: run for d in run_dirs()}
    assert runs[url_a]["status"] == "failed" and runs[url_a]["note"]
    assert (runs[url_b]["status"], runs[url_b]["note"]) == (
        "interrupted",
        "stopped with variant A, which failed",
    )
