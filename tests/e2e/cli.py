"""The one way tests run the real `recall-eval` command line: a subprocess, as a user runs it (exit codes
and stderr as a user sees them), importing this checkout. `home` sets the run store ($RECALL_EVAL_HOME);
without it the caller's environment decides (tests/conftest.py points it at a temp dir)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
ENTRY = "import sys; from recall_eval.cli import main; sys.argv[0] = 'recall-eval'; main()"


def cli_argv(*args: str) -> list[str]:
    return [sys.executable, "-c", ENTRY, *args]


def cli_env(home: Path | None = None) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    env.setdefault("COLUMNS", "200")
    if home is not None:
        env["RECALL_EVAL_HOME"] = str(home)
    return env


def run_cli(
    *args: str, timeout: float = 600, home: Path | None = None, cwd: Path = REPO
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        cli_argv(*args), capture_output=True, text=True, timeout=timeout, env=cli_env(home), cwd=cwd
    )


def start_cli(*args: str, home: Path | None = None, cwd: Path = REPO, **popen: Any) -> subprocess.Popen[str]:
    """The CLI started, not waited for (stdout and stderr merged unless `popen` says otherwise)."""
    streams = {"stdout": subprocess.PIPE, "stderr": subprocess.STDOUT, **popen}
    return subprocess.Popen(cli_argv(*args), env=cli_env(home), cwd=cwd, text=True, **streams)


def error_lines(completed: subprocess.CompletedProcess[str]) -> list[str]:
    return [line for line in completed.stderr.splitlines() if line.strip()]
