"""Exit codes a CI job gates on, through the real CLI: 0 met, 2 bad input (before anything starts),
3 nothing measured, 4 recall below --fail-under. Against tests/recall_eval/tiny_server.py (a real
HTTP server that answers the first ABC-123-XYZ code in the prompt: needles right, config values
wrong) and, for 'nothing measured', the reference engine launched through its profile."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from recall_eval.store import load_run
from tests.e2e.cli import error_lines, run_cli
from tests.e2e.reference_server import free_port
from tests.e2e.served_process import start_served

TINY = Path(__file__).resolve().parents[1] / "recall_eval" / "tiny_server.py"
GRID = ["--lengths", "400,800", "--depths", "0,100", "--trials", "1", "--no-report"]


def _runs_home() -> Path:
    return Path(os.environ["RECALL_EVAL_HOME"])


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    port = free_port()
    log = tmp_path_factory.mktemp("tiny") / "server.log"
    server = start_served([sys.executable, str(TINY), str(port)], log, port)
    try:
        yield server.base_url
    finally:
        server.stop()


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["--lengths", "10"], "--lengths 10: shorter than any prompt these suites can render"),
        (["--lengths", "10,5", "--suite", "needle,config"], "tiktoken's estimate"),
        (["--fail-under", "95"], "--fail-under overall: 95 is not a recall between 0 and 1"),
        (["--fail-under", "config=0.9"], "suite 'config' is not in this run"),
        (["--retry", "error"], "--retry applies to a resumed run"),
    ],
)
def test_bad_input_exits_2_before_anything_starts(args, fragment):
    started = time.monotonic()
    done = run_cli("sweep", *args)
    assert done.returncode == 2, done.stderr
    (line,) = error_lines(done)
    assert fragment in line, line
    assert not _runs_home().exists() or not any(_runs_home().iterdir())  # no run directory
    assert time.monotonic() - started < 60  # no server start


def test_recall_met_exits_0_and_below_the_gate_exits_4(tiny):
    met = run_cli("sweep", "--base-url", tiny, *GRID, "--fail-under", "needle=0.99")
    assert met.returncode == 0, met.stderr
    below = run_cli(
        "sweep", "--base-url", tiny, *GRID, "--suite", "needle,config", "--fail-under", "0.2,config=0.5"
    )
    assert below.returncode == 4, below.stderr
    lines = [line for line in error_lines(below) if "--fail-under" in line]
    assert lines == ["config: recall 0.000 (0/4) below --fail-under 0.5"], below.stderr  # overall 0.5 >= 0.2


def test_no_answer_from_a_live_model_exits_3(tiny):
    done = run_cli("sweep", "--base-url", tiny, "--lengths", "5000,9000", "--depths", "50", "--trials", "1")
    assert done.returncode == 3, done.stderr
    assert "no case got an answer from a live model (too_long 2): nothing was measured" in done.stderr


@pytest.mark.slow
def test_reference_engine_past_its_context_exits_3():
    done = run_cli("sweep", "--lengths", "200000", "--depths", "0,100", "--trials", "1", "--no-report")
    assert done.returncode == 3, done.stderr
    (run_dir,) = [path.parent for path in _runs_home().glob("*/run.json")]
    run, results = load_run(run_dir)
    assert run.status == "finished" and {r.outcome for r in results} == {"too_long"}


def test_resume_retry_runs_errors_again_and_keeps_the_first_attempt(tiny, tmp_path):
    done = run_cli("sweep", "--base-url", tiny, *GRID, "--out", str(tmp_path / "r"))
    assert done.returncode == 0, done.stderr
    (run_dir,) = [path.parent for path in (tmp_path / "r").glob("*/run.json")]
    results = run_dir / "results.jsonl"
    lines = results.read_text().splitlines()
    # one case recorded as an error (as a server hiccup would leave it)
    hurt = lines[0].replace('"outcome":"pass"', '"outcome":"error"')
    assert hurt != lines[0]
    results.write_text("\n".join([hurt, *lines[1:]]) + "\n")
    again = run_cli("sweep", "--resume", str(run_dir), "--retry", "error,timeout", "--no-report")
    assert again.returncode == 0, again.stderr
    after = results.read_text().splitlines()
    assert len(after) == len(lines) + 1 and after[0] == hurt  # the first attempt is kept
    _, final = load_run(run_dir)
    assert len(final) == len(lines) and all(r.outcome == "pass" for r in final)  # the latest counts
