"""recall-eval's command line: parses options, calls the library layer (recall_eval.api), prints, and
owns the exit codes. Each command lives in its own module and registers on `app`.

Start-up imports only the module of the command on the command line: `--help` and `--version` import
none (they list COMMANDS, each with the first sentence of its help), so they answer without loading
pydantic, the library layer or the suites (tests/benchmarks/bench_startup.py times them;
tests/recall_eval/test_cli_startup.py checks the listing matches the commands' own help)."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Sequence

from recall_eval.cli.app import app, run_cli

# Command modules (each registers its command on `app`, under the module's name, '-' for '_'), in listing order,
# with the first sentence of the command's help: what `recall-eval --help` shows beside its name.
COMMANDS = {
    "sweep": "Run the recall grid (suites x lengths x depths x trials) and write a report.",
    "report": "Render RUN_DIR/report.html (or a compare directory's compare.html) again; prints its path.",
    "runs": "List runs (id, status, variant, profile, index-K dtype, index_topk, suites, lengths, cases "
    "done, recall, created) and compare directories (variants and their runs).",
    "compare": "Compare server variants on identical cases: paired recall test (scored suites: score "
    "differences, Wilcoxon signed-rank), difference heatmaps, throughput.",
    "study": "Run every cell of the axes' cross product on identical cases and say which setting keeps "
    "recall, at what cost: exact McNemar per cell against the baseline (pooled, per suite, per length), "
    "Holm-corrected over the cells; recall per length with Wilson intervals; speed and memory per cell; "
    "a recommendation.",
    "serve": "Launch PROFILE, print the ready time and endpoint, and serve until Ctrl-C; then stop every process.",
    "plan": "Index-key bytes per token (per layer and in total), KV pool, max tokens and sequences that "
    "fit, for fp8 / fp4 / bf16 index keys, and what switching precision changes.",
    "profiles": "List profiles (shipped ones plus ./recall-eval.toml) with their resolved commands and env.",
    "export": "Write the results of RUNS as one table, one row per case (the columns are listed in README, "
    '"Results as data").',
    "ray-status": "What the Ray cluster offers (nodes, GPUs, CPUs, free now) against what each profile's "
    "server needs (GPUs, nodes of what size), and where each rank of a multi-node server would run.",
    "baseline": "Stored baselines: save a finished run's verdicts as a small file to commit; gate a later "
    "run on it with `recall-eval sweep --baseline FILE`.",
    "config": "Run files: the options of a command in TOML (--config FILE).",
}
_NEEDS_ALL = {"config"}  # `config show COMMAND` resolves another command's options
_ROOT_FLAGS = {"--debug"}  # root options that take no value and come before the command


def _register_commands(names: Sequence[str] = tuple(COMMANDS)) -> None:
    for name in names:
        importlib.import_module(f"recall_eval.cli.{name.replace('-', '_')}")


def _listed_only() -> None:
    """Stands in for a command in the root listing; never runs (a named command loads its module)."""


def _command_in(argv: Sequence[str]) -> str | None:
    """The command argv names ('' when it names none: --help, --version, no arguments)."""
    for arg in argv:
        if arg in _ROOT_FLAGS:
            continue
        return "" if arg.startswith("-") else arg
    return ""


def register_for(argv: Sequence[str]) -> None:
    """Register what this command line needs: the named command's module; for the root (--help,
    --version) a summary entry per command; every module for `config` or a name that is not a command
    (so click's "No such command" and its suggestions stay as they were)."""
    command = _command_in(argv)
    if command == "":
        for name, summary in COMMANDS.items():
            app.command(name, help=summary)(_listed_only)
    elif command in COMMANDS and command not in _NEEDS_ALL:
        _register_commands([command])
    else:
        _register_commands()


def main() -> None:
    register_for(sys.argv[1:])
    run_cli()


__all__ = ["COMMANDS", "app", "main"]
