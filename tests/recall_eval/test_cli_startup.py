"""Start-up loads only the command on the command line: `--help` and `--version` import no command
module, and the root listing they print is the one the commands themselves would give.
(The CPU time is a benchmark, not a test: tests/benchmarks/bench_startup.py.)"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from recall_eval.cli import COMMANDS
from tests.e2e.cli import REPO, cli_env

# what --help / --version must not load: the library layer, the suites, pydantic and what sends requests
NOT_AT_START = ("pydantic", "recall_eval.types", "recall_eval.api", "suites", "httpx", "pandas", "numpy")


def _python(code: str, columns: str = "200") -> str:
    env = {**cli_env(), "COLUMNS": columns}
    done = subprocess.run([sys.executable, "-c", code], env=env, cwd=REPO, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.mark.parametrize("flag", ["--help", "--version"])
def test_help_and_version_load_no_command_module(flag):
    code = (
        f"import sys\nfrom recall_eval.cli import main\nsys.argv = ['recall-eval', {flag!r}]\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        f"print('LOADED:' + ','.join(m for m in {NOT_AT_START!r} if m in sys.modules))\n"
        "print('COMMANDS:' + ','.join(m for m in sys.modules if m.startswith('recall_eval.cli.') "
        "and m != 'recall_eval.cli.app'))"
    )
    lines = _python(code).splitlines()
    assert lines[-2] == "LOADED:" and lines[-1] == "COMMANDS:", lines[-2:]


@pytest.mark.parametrize("columns", ["200", "60"])
def test_root_help_lists_what_the_registered_commands_say(columns):
    lazy = _python(
        "import sys\nfrom recall_eval.cli import main\nsys.argv = ['recall-eval', '--help']\nmain()", columns
    )
    full = _python(
        "import sys\nfrom recall_eval.cli import _register_commands, run_cli\n"
        "sys.argv = ['recall-eval', '--help']\n_register_commands()\nrun_cli()",
        columns,
    )
    assert lazy == full
    assert "Commands:" in lazy and "config" in lazy


def test_each_summary_is_the_first_sentence_of_its_command_help():
    """At any width the listing cuts a help at its first sentence, so the summaries must equal them
    (in a fresh interpreter: other tests register their own commands on the shared app)."""
    code = (
        "import json, typer\nfrom recall_eval.cli import _register_commands, app\n_register_commands()\n"
        "group = typer.main.get_command(app)\n"
        "print(json.dumps([[n, group.commands[n].get_short_help_str(limit=10_000)] for n in group.list_commands(None)]))"
    )
    listed = json.loads(_python(code).splitlines()[-1])
    assert [name for name, _ in listed] == list(COMMANDS)  # every command, in listing order
    for name, summary in listed:
        assert summary == COMMANDS[name], name


def test_a_named_command_loads_only_its_module():
    code = (
        "import sys\nfrom recall_eval.cli import register_for\nregister_for(['--debug', 'plan', '--help'])\n"
        "print(','.join(sorted(m for m in sys.modules if m.startswith('recall_eval.cli.') "
        "and m.count('.') == 2 and m.rsplit('.', 1)[1] in __import__('recall_eval.cli').cli.COMMANDS)))"
    )
    assert _python(code).strip() == "recall_eval.cli.plan"
