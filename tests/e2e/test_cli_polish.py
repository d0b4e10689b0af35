"""What a newcomer sees of the command line: help text, --version, plan and compare input errors, exit codes."""

from __future__ import annotations

import re

import pytest

from recall_eval.api.options import DEFAULT_GRID, DEFAULT_REQUEST
from tests.e2e.cli import error_lines, run_cli

COMMANDS = ("sweep", "compare", "report", "runs", "serve", "plan", "profiles")


def test_version() -> None:
    done = run_cli("--version")
    assert done.returncode == 0 and re.fullmatch(r"recall-eval \d+\.\d+\S*\n", done.stdout), done.stdout


@pytest.mark.parametrize("command", ["", *COMMANDS])
def test_help_has_one_default_style_and_no_bool_type(command: str) -> None:
    done = run_cli(*([command] if command else []), "--help")
    assert done.returncode == 0, done.stderr
    assert "<bool>" not in done.stdout and "[default:" not in done.stdout, done.stdout


def test_sweep_and_compare_help_read_the_defaults_table() -> None:
    for command in ("sweep", "compare"):
        text = " ".join(run_cli(command, "--help").stdout.split())  # unwrap
        assert f"(default: {DEFAULT_GRID.lengths})" in text and f"(default: {DEFAULT_GRID.trials})" in text
        assert f"(default: {DEFAULT_REQUEST.request_timeout_s:g})" in text
    sweep_help = " ".join(run_cli("sweep", "--help").stdout.split())
    assert "--index-k-dtype <str> Profile override: fp8, bf16 or fp4." in sweep_help


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["--context-length", "0"], "--context-length 0: must be at least 1 token"),
        (["--context-length", "100000000"], "past the model's 1,048,576 positions"),
        (["--gpu-mem-gb", "0"], "--gpu-mem-gb 0: must be above 0 GiB"),
    ],
)
def test_plan_refuses_impossible_values(args: list[str], fragment: str) -> None:
    done = run_cli("plan", "dsv4-flash", *args)
    lines = error_lines(done)
    assert done.returncode == 2 and len(lines) == 1 and fragment in lines[0], done.stderr


def test_plan_speaks_to_the_user() -> None:
    done = run_cli("plan", "dsv4-flash", "--context-length", "1000000", "--mem-fraction", "0.3")
    assert done.returncode == 0, done.stderr
    assert "seed" not in done.stdout
    assert "one sequence of 1,000,000 tokens does not fit in the pool" in " ".join(done.stdout.split())


def test_unknown_variant_names_the_variant_syntax() -> None:
    done = run_cli("compare", "fp8", "bf61")
    lines = error_lines(done)
    assert done.returncode == 2 and len(lines) == 1, done.stderr
    assert "variant 'bf61': unknown profile 'bf61'" in lines[0]
    assert "fp8, bf16, fp4, topk=" in lines[0] and "PROFILE:OVERRIDES" in lines[0]


@pytest.mark.parametrize(
    "args",
    [
        ["report", "/no/such/run"],
        ["sweep", "--resume", "/no/such/run"],
        ["sweep", "--trials", "0"],
        ["sweep", "--trials", "two"],
        ["compare", "fp8"],
        ["serve", "nope"],
        ["profiles", "nope"],
        ["plan", "reference"],
        ["runs", "--no-such-option"],
    ],
)
def test_user_mistakes_exit_2(args: list[str]) -> None:
    done = run_cli(*args)
    assert done.returncode == 2, (args, done.stderr)
    assert "Traceback" not in done.stderr
