"""--retries (one declaration in recall_eval.api.options, stored in the RunSpec, read where the clients
are built): through the real CLI, against a server whose first two chat answers are HTTP 503."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from recall_eval.store import load_run
from tests.e2e.cli import run_cli
from tests.e2e.served_process import free_port, start_served

pytestmark = pytest.mark.slow

TINY = Path(__file__).resolve().parents[1] / "recall_eval" / "tiny_server.py"
GRID = ["--lengths", "300", "--depths", "50", "--trials", "1", "--no-report"]


def sweep_against_flaky_server(tmp_path: Path, *retries: str) -> tuple[str, str, dict]:
    port = free_port()
    server = start_served([sys.executable, str(TINY), str(port), "flaky", "2"], tmp_path / "server.log", port)
    try:
        out = tmp_path / "out"
        done = run_cli("sweep", "--base-url", server.base_url, *GRID, *retries, "--out", str(out))
    finally:
        server.stop()
    assert "Traceback" not in done.stderr, done.stderr
    (run_dir,) = out.iterdir()
    run, (result,) = load_run(run_dir)
    return result.outcome, result.error or "", json.loads(run.model_dump_json())["spec"]


def test_retries_2_outlasts_two_503s_and_is_stored(tmp_path: Path) -> None:
    outcome, error, spec = sweep_against_flaky_server(tmp_path, "--retries", "2")
    assert (outcome, error, spec["retries"]) == ("pass", "", 2)


def test_retries_0_gives_up_at_the_first_503(tmp_path: Path) -> None:
    outcome, error, spec = sweep_against_flaky_server(tmp_path, "--retries", "0")
    assert outcome == "error" and "HTTP 503" in error and "after 1 attempts" in error and spec["retries"] == 0


def test_retries_below_zero_is_bad_input() -> None:
    done = run_cli("sweep", "--retries", "-1", "--base-url", "http://127.0.0.1:9")
    assert done.returncode == 2 and "--retries -1: must be at least 0" in done.stderr
