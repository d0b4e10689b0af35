"""Thinking models through the command line: the knobs reach the server, a budget spent reasoning is
reported as such (not a miss), and a thinking run without --max-tokens gets a budget big enough."""

from __future__ import annotations

import sys
from pathlib import Path

import httpx
import pytest

from recall_eval.exit_codes import EXIT_BUDGET_TOO_SMALL
from recall_eval.scoring import REASONING_RAN_OUT
from recall_eval.store import load_run
from recall_eval.thinking import THINKING_MAX_TOKENS
from tests.e2e.cli import run_cli
from tests.e2e.served_process import free_port, start_served
from tests.reports.dom import parse

SERVER = Path(__file__).with_name("thinking_server.py")
GRID = ["--lengths", "200", "--depths", "0,100", "--trials", "1"]


@pytest.fixture
def thinker(tmp_path):
    port = free_port()
    server = start_served([sys.executable, str(SERVER), str(port)], tmp_path / "thinker.log", port)
    yield server
    server.stop()


def _runs(root: Path) -> dict[str, tuple]:
    runs = {}
    for run_dir in root.iterdir():
        if (run_dir / "run.json").is_file():
            run, results = load_run(run_dir)
            runs[run.spec.variant] = (run, results)
    return runs


def test_compare_think_off_on_with_a_small_budget(thinker, tmp_path, monkeypatch):
    monkeypatch.setenv("RECALL_EVAL_HOME", str(tmp_path / "home"))
    completed = run_cli(
        "compare", "think=off", "think=on", "--base-url", thinker.base_url, "--base-url", thinker.base_url,
        "--max-tokens", "32", *GRID,
    )  # fmt: skip
    # think=on spent its whole (given) budget reasoning: the compare says the budget is too small (exit 5)
    assert completed.returncode == EXIT_BUDGET_TOO_SMALL, completed.stderr
    assert "variant think=on, every answer was cut inside the model's reasoning" in completed.stderr
    runs = _runs(tmp_path / "home")
    off, on = runs["think=off"], runs["think=on"]
    assert off[0].spec.chat_template_kwargs == {"thinking": False, "enable_thinking": False}
    assert on[0].spec.chat_template_kwargs == {"thinking": True, "enable_thinking": True}
    assert {r.outcome for r in off[1]} == {"pass"}
    assert {r.outcome for r in on[1]} == {"truncated"}
    assert all(REASONING_RAN_OUT in (r.error or "") for r in on[1])
    assert all(r.completion is not None and r.completion.reasoning for r in on[1])
    seen = httpx.get(f"{thinker.base_url}/seen").json()
    assert {str(s["chat_template_kwargs"]) for s in seen} == {
        str({"thinking": False, "enable_thinking": False}),
        str({"thinking": True, "enable_thinking": True}),
    }


def test_thinking_sweep_gets_the_thinking_budget(thinker, tmp_path):
    out = tmp_path / "runs"
    completed = run_cli(
        "sweep", "--base-url", thinker.base_url, "--reasoning-effort", "high",
        "--extra-body", '{"top_k": 1}', *GRID, "--out", str(out),
    )  # fmt: skip
    assert completed.returncode == 0, completed.stderr
    ((run, results),) = _runs(out).values()
    assert run.spec.max_tokens == THINKING_MAX_TOKENS and run.spec.reasoning_effort == "high"
    assert run.spec.extra_body == {"top_k": 1}
    assert {r.outcome for r in results} == {"pass"}
    assert all(s["reasoning_effort"] == "high" for s in httpx.get(f"{thinker.base_url}/seen").json())
    report = next(out.iterdir()) / "report.html"
    settings = parse(report.read_text()).by_id("settings-table").text  # shown under their labels
    assert "reasoning effort" in settings and "high" in settings and '"top_k": 1' in settings
    assert 'request settings: reasoning effort high, extra body {"top_k": 1}' in completed.stderr


@pytest.mark.parametrize(
    ("flag", "value", "fragment"),
    [
        ("--chat-template-kwargs", "{thinking: true}", "--chat-template-kwargs '{thinking: true}': not JSON"),
        ("--extra-body", "[1, 2]", "--extra-body '[1, 2]': must be a JSON object"),
        ("--header", "no-colon", "write it as 'Name: value'"),
    ],
)
def test_bad_knobs_are_one_line_exit_2(flag, value, fragment):
    completed = run_cli("sweep", "--base-url", "http://127.0.0.1:9", flag, value, *GRID)
    lines = [line for line in completed.stderr.splitlines() if line.strip()]
    assert completed.returncode == 2 and len(lines) == 1 and fragment in lines[0], lines
