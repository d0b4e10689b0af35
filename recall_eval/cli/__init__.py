"""recall-eval's command line: parses options, calls the library layer (recall_eval.api), prints, and
owns the exit codes. Each command lives in its own module and registers on `app`."""

from __future__ import annotations

import importlib

from recall_eval.cli.app import app, run_cli

# Command modules; each registers its commands on `app` when imported.
_COMMAND_MODULES = (
    "sweep",
    "report",
    "runs",
    "compare",
    "study",
    "serve",
    "plan",
    "profiles",
    "export",
    "baseline",
    "config",
    "cluster",
)


def _register_commands() -> None:
    for name in _COMMAND_MODULES:
        importlib.import_module(f"recall_eval.cli.{name}")


def main() -> None:
    _register_commands()
    run_cli()


__all__ = ["app", "main"]
