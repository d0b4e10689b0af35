"""Bad input to `recall-eval sweep/report`: one line, the right exit code, and no run left behind."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from launchers.ports import free_port
from recall_eval.store import RunStore
from recall_eval.types import Run, RunSpec
from tests.e2e.cli import error_lines, run_cli


def _runs_home() -> Path:
    return Path(os.environ["RECALL_EVAL_HOME"])


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["--lengths", "338..abc"], "--lengths '338..abc': 'abc' is not a whole number"),
        (["--lengths", "22597..338"], "start 22597 is above end 338"),
        (["--lengths", "338..22597:0"], "point count 0"),
        (["--depths", "0..150:5"], "--depths '0..150:5': depth 150 is outside 0-100"),
        (["--depths", "a,b"], "'a' is not a number"),
        (["--suite", "haystack"], "unknown suite 'haystack'"),
        (["--trials", "0"], "--trials 0: must be at least 1"),
        (["--concurrency", "0"], "--concurrency 0: must be at least 1"),
        (["--base-url", "localhost:30000"], "--base-url 'localhost:30000': write a URL"),
        (["--profile", "no-such-profile"], "unknown profile 'no-such-profile'"),
        (["--base-url", "http://127.0.0.1:9", "--profile", "reference"], "drop --profile"),
    ],
)
def test_bad_sweep_input_is_one_line_exit_2(args, fragment):
    completed = run_cli("sweep", *args)
    lines = error_lines(completed)
    assert completed.returncode == 2, completed.stderr
    assert len(lines) == 1 and fragment in lines[0], lines
    assert not _runs_home().exists() or not any(_runs_home().iterdir())


def test_unreachable_base_url_is_one_line_and_leaves_no_run():
    port = free_port()  # a port nobody listens on
    completed = run_cli("sweep", "--base-url", f"http://127.0.0.1:{port}", "--lengths", "1000")
    lines = error_lines(completed)
    assert completed.returncode == 1
    assert len(lines) == 1 and f"cannot reach http://127.0.0.1:{port}" in lines[0], lines
    assert not _runs_home().exists() or not any(_runs_home().iterdir())


@pytest.mark.parametrize("command", [["sweep", "--resume"], ["report"]])
def test_missing_run_dir(command, tmp_path):
    completed = run_cli(*command, str(tmp_path / "gone"))
    lines = error_lines(completed)
    assert completed.returncode == 2  # a wrong path is a user mistake
    assert len(lines) == 1 and "does not exist" in lines[0], lines
    not_a_run = run_cli(*command, str(tmp_path))
    assert not_a_run.returncode == 2 and "not a run directory" in not_a_run.stderr


def test_resume_refuses_spec_changes(tmp_path):
    run = Run(run_id="r", spec=RunSpec(lengths=(1000,), depths=(50.0,)), created_at=time.time())
    store = RunStore.create(run, root=tmp_path)
    completed = run_cli("sweep", "--resume", str(store.path), "--lengths", "2000", "--seed", "3")
    lines = error_lines(completed)
    assert completed.returncode == 2
    assert len(lines) == 1 and "drop --lengths, --seed" in lines[0], lines


def test_runs_lists_nothing_then_a_run(tmp_path):
    assert "no runs in" in run_cli("runs", "--home", str(tmp_path)).stdout
    run = Run(
        run_id="20240101-000000-abcdef", spec=RunSpec(lengths=(1000, 2000), depths=(50.0,)), created_at=0
    )
    RunStore.create(run, root=tmp_path)
    listed = run_cli("runs", "--home", str(tmp_path))
    assert listed.returncode == 0
    assert "20240101-000000-abcdef" in listed.stdout and "0/4" in listed.stdout and "running" in listed.stdout
