"""`recall-eval study` refuses bad input before anything starts: one line, exit 2, no run and no study
directory (a malformed axis, an unknown --cost, a baseline the planner says does not fit)."""

from __future__ import annotations

import pytest

from recall_eval.store import runs_home
from tests.e2e.cli import error_lines, run_cli

GRID = ["--lengths", "512", "--depths", "50", "--trials", "1"]


@pytest.mark.parametrize(
    ("args", "names"),
    [
        (["--axis", "colour=red,blue"], "--axis 'colour=red,blue': unknown knob 'colour'"),
        (
            ["--axis", "dtype=fp8,bf16", "--cost", "price"],
            "--cost 'price': must be one of memory, decode, ttft",
        ),
        (["--axis", "dtype=fp8,bf16", "--baseline", "topk=4"], "--baseline 'topk=4' matches no cell"),
        (
            ["--axis", "ctx=300,4096"],
            "the baseline cell 'ctx=300' does not fit: a 512-token prompt does not fit: context 300, KV pool 300",
        ),
    ],
)
def test_bad_study_input_is_one_line_and_starts_nothing(args: list[str], names: str) -> None:
    done = run_cli("study", *args, *GRID, timeout=120)
    assert done.returncode == 2, done.stderr
    (line,) = error_lines(done)
    assert names in line
    assert not runs_home().exists() or not any(runs_home().iterdir())


def test_a_search_study_is_not_silently_kept_off_the_cluster() -> None:
    """--lengths search: runs each cell's search on this machine: with --ray it is refused, not run locally
    while the user believes it is placed on the cluster (no Ray is reached: the refusal comes first)."""
    done = run_cli(
        "study", "--axis", "topk=4,64", "--lengths", "search:128..1024:2", "--ray", "127.0.0.1:9",
        "--depths", "50", "--trials", "1", timeout=120,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    (line,) = error_lines(done)
    assert "--lengths search: runs each cell's search on this machine" in line and "drop --ray" in line
    assert not runs_home().exists() or not any(runs_home().iterdir())
