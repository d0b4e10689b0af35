"""What CI reads from a compare, through the real CLI: two real servers (tests/recall_eval/tiny_server.py,
the second started `wrong`: it misses every needle), --fail-on-regression with --junit, --metrics and
GITHUB_STEP_SUMMARY. The JUnit file (read by junitparser) has one test case per variant x suite x
length and fails exactly the candidate's cells."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from junitparser import JUnitXml

from tests.e2e.cli import REPO, cli_argv, cli_env
from tests.e2e.reference_server import free_port
from tests.e2e.served_process import start_served

pytestmark = pytest.mark.slow

TINY = Path(__file__).resolve().parents[1] / "recall_eval" / "tiny_server.py"


def _tiny(folder: Path, *mode: str) -> Iterator[str]:
    port = free_port()
    server = start_served([sys.executable, str(TINY), str(port), *mode], folder / "log", port)
    try:
        yield server.base_url
    finally:
        server.stop()


@pytest.fixture(scope="module")
def good(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    yield from _tiny(tmp_path_factory.mktemp("good"))


@pytest.fixture(scope="module")
def wrong(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    yield from _tiny(tmp_path_factory.mktemp("wrong"), "wrong")


def test_a_compare_gate_writes_junit_per_variant_metrics_and_the_step_summary(good, wrong, tmp_path):
    summary, junit, metrics = tmp_path / "summary.md", tmp_path / "junit.xml", tmp_path / "metrics.json"
    argv = cli_argv(
        "compare", "main", "candidate", "--base-url", good, "--base-url", wrong, "--suite", "needle",
        "--lengths", "338,700", "--depths", "0,50,100", "--trials", "2", "--fail-on-regression",
        "--junit", str(junit), "--metrics", str(metrics), "--commit", "deadbee",
    )  # fmt: skip
    env = {
        **cli_env(),
        "GITHUB_STEP_SUMMARY": str(summary),
        "RECALL_EVAL_HOME": os.environ["RECALL_EVAL_HOME"],
    }
    done = subprocess.run(argv, capture_output=True, text=True, timeout=600, env=env, cwd=REPO)
    assert done.returncode == 4, done.stderr[-3000:]
    suites = list(JUnitXml.fromfile(str(junit)))
    assert [(s.name, s.tests, s.failures) for s in suites] == [
        ("recall-eval.main.needle", 2, 0),
        ("recall-eval.candidate.needle", 2, 2),
    ]
    assert [case.name for case in suites[1]] == ["needle @ 338 tokens", "needle @ 700 tokens"]
    text = summary.read_text()
    assert text.startswith("# recall-eval compare main vs candidate: failed (exit 4)")
    assert "### variant candidate" in text and "- variant candidate, needle: recall 1.000 -> 0.000" in text
    facts = json.loads(metrics.read_text())
    assert facts["verdict"]["exit_code"] == 4 and [v["label"] for v in facts["variants"]] == [
        "main",
        "candidate",
    ]
    assert {v["commit"] for v in facts["variants"]} == {"deadbee"}
    assert facts["variants"][1]["suites"]["needle"]["recall"] == 0.0
