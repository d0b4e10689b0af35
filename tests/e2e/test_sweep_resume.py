"""SIGINT and SIGKILL of the harness mid-sweep, then --resume: every case exactly once, and results
identical per case id to an uninterrupted run with the same seed (against the real reference server)."""

from __future__ import annotations

import signal
import subprocess
import time
from pathlib import Path

import pytest

from recall_eval.store import load_run
from recall_eval.types import Result
from tests.e2e.cli import cli_argv, cli_env, run_cli
from tests.e2e.reference_server import ReferenceServer

pytestmark = pytest.mark.slow
GRID = ["--lengths", "400..1600:3", "--depths", "0,50,100", "--trials", "1", "--seed", "11", "--max-tokens", "16"]  # fmt: skip
TOTAL = 9


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    log = tmp_path_factory.mktemp("server") / "server.log"
    handle = ReferenceServer(log, "--context-length", "4096")
    yield handle
    handle.stop()


@pytest.fixture(scope="module")
def baseline(server, tmp_path_factory) -> dict[str, tuple]:
    out = tmp_path_factory.mktemp("baseline")
    completed = run_cli(
        "sweep", "--base-url", server.base_url, *GRID, "--no-report", "--out", str(out), timeout=600
    )
    assert completed.returncode == 0, completed.stderr
    _, results = load_run(Path(completed.stdout.strip().splitlines()[-1]))
    assert len(results) == TOTAL
    return _content(results)


def _content(results: list[Result]) -> dict[str, tuple]:
    """What must not depend on interruptions: per case id, everything but timings."""
    return {
        r.case_id: (
            r.outcome, r.answer, r.expected, r.target_tokens, r.depth_percent, r.prompt_tokens,
            r.needle_token_offset, r.tokenizer, r.completion.prompt_tokens if r.completion else None,
            r.completion.completion_tokens if r.completion else None,
        )
        for r in results
    }  # fmt: skip


def _interrupt(
    server, out: Path, sig: signal.Signals, after: int, sigint_ignored: bool = False
) -> tuple[Path, subprocess.CompletedProcess]:
    argv = cli_argv("sweep", "--base-url", server.base_url, *GRID, "--no-report", "--out", "interrupted")
    env = {**cli_env(), "RECALL_EVAL_HOME": str(out)}
    # a background job of a non-interactive shell starts with SIGINT ignored
    ignore = (lambda: signal.signal(signal.SIGINT, signal.SIG_IGN)) if sigint_ignored else None
    process = subprocess.Popen(
        argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=ignore
    )
    results = out / "interrupted" / "results.jsonl"
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and process.poll() is None:
        if results.exists() and results.read_text().count("\n") >= after:
            break
        time.sleep(0.02)
    process.send_signal(sig)
    stdout, stderr = process.communicate(timeout=60)
    return out / "interrupted", subprocess.CompletedProcess(argv, process.returncode, stdout, stderr)


@pytest.mark.parametrize(
    "sig", [signal.SIGINT, signal.SIGTERM, signal.SIGKILL], ids=["sigint", "sigterm", "sigkill"]
)
def test_interrupt_then_resume_matches_uninterrupted(server, baseline, tmp_path, sig):
    run_dir, stopped = _interrupt(server, tmp_path, sig, after=3)
    run, partial = load_run(run_dir)
    assert 3 <= len(partial) < TOTAL, "the sweep must be stopped mid-way"
    if sig == signal.SIGINT:
        assert stopped.returncode == 130, stopped.stderr
        assert run.status == "interrupted"
        assert f"interrupted: resume with: recall-eval sweep --resume {run_dir}" in stopped.stderr
    elif sig == signal.SIGTERM:  # handled like Ctrl-C, with its own exit code and word
        assert stopped.returncode == 143, stopped.stderr
        assert run.status == "interrupted"
        assert f"terminated (SIGTERM): resume with: recall-eval sweep --resume {run_dir}" in stopped.stderr
    else:
        assert stopped.returncode == -signal.SIGKILL
        assert run.status == "running"  # nothing could be written; resume does not need it
    resumed = run_cli("sweep", "--resume", str(run_dir), timeout=600)
    assert resumed.returncode == 0, resumed.stderr
    run, results = load_run(run_dir)
    assert run.status == "finished"
    ids = [r.case_id for r in results]
    assert len(ids) == len(set(ids)) == TOTAL  # every case exactly once
    assert _content(results) == baseline
    assert (run_dir / "report.html").is_file()
    # --resume of the finished run: the report rendered again, no server reached (this URL is dead)
    (run_dir / "report.html").unlink()
    again = run_cli("sweep", "--resume", str(run_dir / "run.json"), "--base-url", "http://127.0.0.1:9")
    assert again.returncode == 0, again.stderr
    assert "already finished: nothing to resume" in again.stderr and (run_dir / "report.html").is_file()
    assert "calibrat" not in again.stderr and len(load_run(run_dir)[1]) == TOTAL


def test_sigterm_stops_a_background_job_whose_sigint_is_ignored(server, tmp_path):
    run_dir, stopped = _interrupt(server, tmp_path, signal.SIGTERM, after=2, sigint_ignored=True)
    assert stopped.returncode == 143, stopped.stderr
    assert load_run(run_dir)[0].status == "interrupted"
    assert f"terminated (SIGTERM): resume with: recall-eval sweep --resume {run_dir}" in stopped.stderr
