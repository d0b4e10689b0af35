"""`recall-eval sweep` end to end against the real reference server (a separate process).

Covers: token-exact calibration against the server's own tokenizer (and its usage.prompt_tokens),
too_long cases that do not stop the run, the report, and the default target (the embedded engine
launched and stopped by the sweep itself).
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
from pathlib import Path

import psutil
import pytest

from recall_eval.calibration import tolerance
from recall_eval.store import load_run
from tests.e2e.cli import cli_argv, cli_env, error_lines, run_cli
from tests.e2e.reference_server import ReferenceServer, free_port

pytestmark = pytest.mark.slow
CONTEXT = 4096


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    log = tmp_path_factory.mktemp("server") / "server.log"
    handle = ReferenceServer(log, "--context-length", str(CONTEXT))
    yield handle
    handle.stop()


def _run_dir(stdout: str) -> Path:
    return Path(stdout.strip().splitlines()[-1]).parent


def test_sweep_hits_lengths_in_server_tokens_and_writes_report(server, tmp_path):
    completed = run_cli(
        "sweep", "--base-url", server.base_url, "--lengths", "338..2000:3", "--depths", "0..100:3",
        "--trials", "1", "--seed", "5", "--concurrency", "2", "--max-tokens", "16", "--out", str(tmp_path),
    )  # fmt: skip
    assert completed.returncode == 0, completed.stderr
    report = Path(completed.stdout.strip().splitlines()[-1])
    assert report.name == "report.html" and report.is_file()
    run, results = load_run(report.parent)
    assert run.status == "finished"
    assert len(results) == 9 and len({r.case_id for r in results}) == 9
    for result in results:
        assert result.tokenizer == "server:/v1/tokenize"
        assert abs(result.prompt_tokens - result.target_tokens) <= tolerance(result.target_tokens)
        # the server counted exactly the tokens calibration measured
        assert result.completion is not None and result.completion.prompt_tokens == result.prompt_tokens
        assert 0 < result.needle_token_offset < result.prompt_tokens
        assert result.outcome in ("pass", "miss", "empty", "truncated")
        assert result.completion.ttft_s > 0 and result.completion.latency_s >= result.completion.ttft_s
    assert run.server_info["max_model_len"] == CONTEXT
    # recall as the report states it, from the one formatting function
    assert re.search(
        r"^recall \d+\.\d% \(Wilson \d+\.\d%-\d+\.\d%\), \d+ passed of 9 answered, strict ",
        completed.stderr,
        re.M,
    )
    assert (report.parent / "calibration-cache.json").is_file()


def test_lengths_a_suite_cannot_fill_use_smaller_forms_or_are_not_applicable(server, tmp_path):
    """70 tokens: needle prompts fit (~55 tokens with no filler), no config document does (its minimal
    layout is 86-102 tokens) (not applicable: never sent, never counted);
    338 tokens: every config case fits, most in a smaller layout. The sweep runs to the end."""
    completed = run_cli(
        "sweep", "--base-url", server.base_url, "--suite", "config,needle", "--lengths", "70,338",
        "--depths", "0,100", "--trials", "2", "--max-tokens", "24", "--out", str(tmp_path),
    )  # fmt: skip
    assert completed.returncode == 0, completed.stderr
    report = Path(completed.stdout.strip().splitlines()[-1])
    run, results = load_run(report.parent)
    assert run.status == "finished" and len(results) == 16
    by_cell = {(r.suite, r.target_tokens): [] for r in results}
    for result in results:
        by_cell[(result.suite, result.target_tokens)].append(result)
    for result in by_cell[("config", 70)]:
        assert result.outcome == "not_applicable" and result.completion is None
        assert "does not fit" in result.error and result.prompt_tokens > 70
    for cell in (("config", 338), ("needle", 70), ("needle", 338)):
        for result in by_cell[cell]:
            assert result.outcome in ("pass", "miss", "empty", "truncated"), result
            assert result.completion.prompt_tokens == result.prompt_tokens
    assert {r.params["layout"] for r in by_cell[("config", 338)]} & {"compact", "minimal"}
    assert "not applicable 4" in completed.stderr
    html = report.read_text()
    assert html.count('class="num cell cell-na"') == 2  # config: 2 depths at 70 tokens
    assert "could not be built" in html


def test_lengths_beyond_the_context_are_too_long_and_the_run_continues(server, tmp_path):
    completed = run_cli(
        "sweep", "--base-url", server.base_url, "--lengths", "1000,4090,6000", "--depths", "50",
        "--trials", "1", "--max-tokens", "64", "--out", str(tmp_path),
    )  # fmt: skip
    assert completed.returncode == 0, completed.stderr
    run, results = load_run(_run_dir(completed.stdout))
    outcomes = {r.target_tokens: r for r in results}
    assert run.status == "finished" and len(results) == 3
    assert outcomes[1000].outcome in ("pass", "miss", "empty", "truncated")
    assert outcomes[6000].outcome == "too_long" and "not sent" in outcomes[6000].error
    # 4090 fits the context but not with a 64-token answer: refused (by us or by the server's 400)
    assert outcomes[4090].outcome == "too_long"
    assert "context length" in outcomes[4090].error
    assert "too_long 2" in completed.stderr


def _servers_on(port: int) -> list[psutil.Process]:
    found = []
    for process in psutil.process_iter(["cmdline"]):
        cmdline = process.info["cmdline"] or []
        if "launchers.reference.server" in cmdline and str(port) in cmdline:
            found.append(process)
    return found


def test_default_target_launches_the_reference_engine_and_stops_it(tmp_path):
    completed = run_cli(
        "sweep", "--lengths", "338..1000:2", "--depths", "50", "--trials", "1", "--context-length", "2048",
        "--port", str(free_port()), "--out", str(tmp_path), timeout=300,
    )  # fmt: skip
    assert completed.returncode == 0, completed.stderr
    run_dir = _run_dir(completed.stdout)
    run, results = load_run(run_dir)
    assert run.profile.engine == "reference" and run.profile.name == "reference"
    assert len(results) == 2 and run.time_to_ready_s is not None
    assert list(run_dir.glob("server-*.log")), list(run_dir.iterdir())
    port = int(run.server_info["base_url"].rsplit(":", 1)[1])
    assert _servers_on(port) == []
    # the start banner is one line without shell syntax; readiness is said once
    [banner] = [line for line in completed.stderr.splitlines() if line.startswith("starting main: ")]
    assert "launchers.reference.server" in banner and banner.endswith("(full command in server-main.log)")
    assert "${PYTHONPATH" not in completed.stderr
    assert completed.stderr.count("ready in ") == 1


def test_report_command_rerenders(server, tmp_path):
    completed = run_cli(
        "sweep", "--base-url", server.base_url, "--lengths", "500", "--depths", "50", "--trials", "1",
        "--no-report", "--out", str(tmp_path),
    )  # fmt: skip
    assert completed.returncode == 0, completed.stderr
    run_dir = Path(completed.stdout.strip().splitlines()[-1])
    assert not (run_dir / "report.html").exists()
    rendered = run_cli("report", str(run_dir))
    assert rendered.returncode == 0, rendered.stderr
    assert Path(rendered.stdout.strip()) == run_dir / "report.html"
    assert (run_dir / "report.html").stat().st_size > 1000
    assert error_lines(rendered)[-1].startswith("recall")
    assert json.loads((run_dir / "run.json").read_text())["status"] == "finished"


def test_ctrl_c_with_a_launched_server_stops_it(tmp_path):
    """Ctrl-C mid-run, whatever the machine's speed: once the first result is stored the server is frozen
    (SIGSTOP), so the other cases cannot finish before the interrupt; the harness must still stop it."""
    port = free_port()
    argv = cli_argv(
        "sweep", "--lengths", "338..1000:3", "--depths", "0,50,100", "--trials", "1", "--max-tokens", "16",
        "--context-length", "2048", "--port", str(port), "--out", "ctrlc",
    )  # fmt: skip
    process = subprocess.Popen(
        argv,
        env={**cli_env(), "RECALL_EVAL_HOME": str(tmp_path)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    results = tmp_path / "ctrlc" / "results.jsonl"
    while process.poll() is None and not (results.exists() and results.read_text().count("\n") >= 1):
        time.sleep(0.02)
    assert process.poll() is None, process.communicate()[1]
    for group in {os.getpgid(server.pid) for server in _servers_on(port)}:
        os.killpg(group, signal.SIGSTOP)  # no case can finish from here on
    process.send_signal(signal.SIGINT)
    _, stderr = process.communicate(timeout=120)
    assert process.returncode == 130, stderr
    run, partial = load_run(tmp_path / "ctrlc")
    assert run.status == "interrupted" and 1 <= len(partial) < 9
    assert "recall-eval sweep --resume" in stderr
    assert _servers_on(port) == []  # a frozen server is stopped too (SIGTERM, SIGCONT, then SIGKILL)
