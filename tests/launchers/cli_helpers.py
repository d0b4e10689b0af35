"""Run recall-eval's real CLI in a subprocess (as a user would), from the repository root."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CLI = [sys.executable, "-c", "from recall_eval.cli import main; main()"]


def cli_env(home: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    env["RECALL_EVAL_HOME"] = str(home)
    env["COLUMNS"] = "200"
    return env


def run_cli(args: list[str], home: Path, cwd: Path, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*CLI, *args],
        cwd=cwd,
        env=cli_env(home),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def start_cli(args: list[str], home: Path, cwd: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [*CLI, *args],
        cwd=cwd,
        env=cli_env(home),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
