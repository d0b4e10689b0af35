"""Run the real `recall-eval` command line in a subprocess (exit codes and stderr as a user sees them)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
ENTRY = "import sys; from recall_eval.cli import main; sys.argv[0] = 'recall-eval'; main()"


def cli_argv(*args: str) -> list[str]:
    return [sys.executable, "-c", ENTRY, *args]


def cli_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    env.setdefault("COLUMNS", "200")
    return env


def run_cli(*args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        cli_argv(*args), capture_output=True, text=True, timeout=timeout, env=cli_env(), cwd=REPO
    )


def error_lines(completed: subprocess.CompletedProcess[str]) -> list[str]:
    return [line for line in completed.stderr.splitlines() if line.strip()]
