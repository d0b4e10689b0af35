"""A third-party suite package, installed with its own entry-points metadata into a temp folder on
PYTHONPATH (no pip), runs through the real `recall-eval sweep` against the launched reference engine
like a built-in suite; a plugin that fails to register stops the command with one line."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from launchers.ports import free_port
from recall_eval.frame import results_frame
from recall_eval.types import RECALL_OUTCOMES
from tests.e2e.cli import cli_argv, cli_env, error_lines
from tests.suites.plugin import install_plugin


def _cli(site: Path, home: Path, *args: str, timeout: float = 400) -> subprocess.CompletedProcess[str]:
    env = cli_env(home)
    env["PYTHONPATH"] = os.pathsep.join([env["PYTHONPATH"], str(site)])
    return subprocess.run(cli_argv(*args), capture_output=True, text=True, timeout=timeout, env=env)


@pytest.mark.slow
def test_a_plugin_suite_runs_like_a_built_in_against_the_reference_engine(tmp_path):
    """Its family expands, its cases are sized in the engine's tokens and answered, its version is in
    the reuse key, and its scored suite lands in the report's task table (its registered section)."""
    site = install_plugin(tmp_path / "site")
    completed = _cli(
        site, tmp_path / "home", "sweep", "--suite", "colors_family", "--lengths", "300,600", "--depths", "50",
        "--trials", "1", "--context-length", "2048", "--port", str(free_port()), "--out", str(tmp_path / "runs"),
    )  # fmt: skip
    assert completed.returncode == 0, completed.stderr
    (run_dir,) = [p for p in (tmp_path / "runs").iterdir() if (p / "run.json").is_file()]
    run = json.loads((run_dir / "run.json").read_text())
    assert run["spec"]["suites"] == ["colors", "colors_scored"] and run["profile"]["engine"] == "reference"
    assert run["versions"]["suite:colors"] == "3" and run["versions"]["suite:colors_scored"] == "3"
    frame = results_frame(run_dir)
    assert sorted(frame["suite"]) == ["colors", "colors", "colors_scored", "colors_scored"]
    assert set(frame["outcome"]) <= set(RECALL_OUTCOMES)  # answers of the live model
    assert (frame["tokenizer"] == "server:/v1/tokenize").all()
    scored = frame[frame["suite"] == "colors_scored"]
    assert scored["score"].notna().all() and frame.loc[frame["suite"] == "colors", "score"].isna().all()
    html = (run_dir / "report.html").read_text()
    assert 'data-task="colors_scored"' in html and 'data-task="colors"' not in html


def test_a_plugin_that_fails_to_register_is_one_line(tmp_path):
    site = install_plugin(tmp_path / "site", "tiny_recall_suite:broken", "bad")
    completed = _cli(site, tmp_path / "home", "sweep", "--suite", "needle", "--lengths", "300", timeout=120)
    assert completed.returncode == 1
    assert error_lines(completed) == [
        "error: suite plugin 'bad' (tiny_recall_suite:broken) failed to register: RuntimeError: this plugin "
        "cannot register; fix or uninstall the package that provides it"
    ]
    assert "Traceback" not in completed.stderr
