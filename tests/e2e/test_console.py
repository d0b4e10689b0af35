"""What a user reads on the console: plain text (no markup eats brackets), one exit code per kind of
bad input, help without typer's internals, a cheap --help, and a Python API that is not silent."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from recall_eval.cli.export import FORMATS_HELP
from recall_eval.frame import EXPORT_FORMATS
from tests.e2e.cli import REPO, cli_env, run_cli
from tests.e2e.served_process import free_port, start_served

SERVER = Path(__file__).with_name("self_describing_server.py")


def test_error_text_keeps_its_brackets():
    done = run_cli("sweep", "--lengths", "[bold]1000")
    assert done.returncode == 2
    assert (
        done.stderr.strip() == "error: --lengths '[bold]1000': '[bold]1000' is not a whole number of tokens"
    )


def test_wrong_override_value_is_named_not_dumped():
    done = run_cli("sweep", "--index-k-dtype", "fp16")
    assert done.returncode == 2
    assert "index_k_dtype='fp16'" in done.stderr and "{" not in done.stderr


def test_a_directory_without_a_run_is_bad_input_for_export_and_report(tmp_path):
    for command in ("export", "report"):
        done = run_cli(command, str(tmp_path))
        assert done.returncode == 2, (command, done.stderr)
        assert len(done.stderr.strip().splitlines()) == 1


def test_help_shows_argument_names_not_python_types():
    for command in ("compare", "study", "export", "report", "plan", "serve", "profiles"):
        text = run_cli(command, "--help").stdout
        assert "<list[" not in text and "{" not in text.splitlines()[0], (command, text[:300])
    assert "Usage: recall-eval compare [OPTIONS] VARIANT..." in run_cli("compare", "--help").stdout
    assert "Usage: recall-eval export [OPTIONS] RUN..." in run_cli("export", "--help").stdout


def test_export_help_lists_the_formats_frame_writes():
    assert FORMATS_HELP == ", ".join(EXPORT_FORMATS)


def test_help_imports_nothing_heavy():
    """--help and --version stay cheap only while start-up imports no pandas, scipy, matplotlib, httpx
    (the CPU cost itself is a benchmark: tests/benchmarks/bench_startup.py)."""
    probe = (
        "import sys\nfrom recall_eval.cli import main\nsys.argv = ['recall-eval', '--help']\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        "print('HEAVY:' + ','.join(m for m in ('pandas', 'scipy', 'matplotlib', 'httpx', 'jinja2') if m in sys.modules))"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], env=cli_env(), cwd=REPO, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == "HEAVY:"


def test_python_api_says_what_it_does(tmp_path):
    """A script that configured no logging still sees notes and progress on stderr."""
    port = free_port()
    server = start_served([sys.executable, str(SERVER), str(port), "bare"], tmp_path / "server.log", port)
    script = (
        "from recall_eval import api\n"
        f"api.sweep(base_url={server.base_url!r}, lengths='200', depths='0,50,100', trials=1, out={str(tmp_path)!r})\n"
    )
    try:
        done = subprocess.run(
            [sys.executable, "-c", script],
            env=cli_env(),
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=300,
        )
    finally:
        server.stop()
    assert done.returncode == 0, done.stderr
    lines = [line for line in done.stderr.splitlines() if line.startswith("recall-eval: ")]
    assert any("calibrating 3 cases" in line for line in lines), done.stderr
    assert any("3/3 cases done, 3 passed" in line for line in lines), done.stderr
    assert any("3 passed of 3 answered" in line for line in lines), done.stderr


def test_piped_output_is_not_wrapped_at_80_columns(tmp_path):
    """Piped (no terminal, no COLUMNS), every line stays whole: the error line and the sweep's summary."""
    env = {key: value for key, value in cli_env().items() if key != "COLUMNS"}
    entry = [sys.executable, "-c", "import sys; from recall_eval.cli import main; main()"]
    name = "a-profile-name-long-enough-to-push-the-error-line-well-past-eighty-columns"
    done = subprocess.run(
        [*entry, "sweep", "--profile", name], env=env, cwd=REPO, capture_output=True, text=True
    )
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1 and name in lines[0], done.stderr

    port = free_port()
    server = start_served([sys.executable, str(SERVER), str(port), "bare"], tmp_path / "server.log", port)
    try:
        done = subprocess.run(
            [*entry, "sweep", "--base-url", server.base_url, "--lengths", "200", "--depths", "0,100",
             "--trials", "1", "--suite", "needle,config", "--out", str(tmp_path)],
            env=env, cwd=REPO, capture_output=True, text=True, timeout=300,
        )  # fmt: skip
    finally:
        server.stop()
    assert done.returncode == 0, done.stderr
    (summary,) = [line for line in done.stderr.splitlines() if line.startswith("recall pooled ")]
    assert len(summary) > 100 and "effective length" in summary and "passed of" in summary


def test_scoring_is_one_declaration_on_every_command_that_takes_it():
    from recall_eval.api.options import CompareOptions, SweepOptions, declared

    assert declared(SweepOptions, "scoring") == declared(CompareOptions, "scoring")
    for command in ("sweep", "compare", "report"):
        text = " ".join(run_cli(command, "--help").stdout.split())
        assert "--scoring lenient|strict The verdict the headline figures use: lenient" in text, command
    bad = run_cli("report", str(REPO), "--scoring", "exact")
    assert bad.returncode == 2 and "--scoring 'exact': pick one of lenient, strict" in bad.stderr


def test_compare_with_a_strict_headline(tmp_path, monkeypatch):
    """compare --scoring strict: compare.json and the runs it makes say strict; each run's console line
    gives the lenient figure beside it."""
    import json

    monkeypatch.setenv("RECALL_EVAL_HOME", str(tmp_path / "runs"))
    servers = []
    try:
        for name in ("a", "b"):
            port = free_port()
            servers.append(
                start_served([sys.executable, str(SERVER), str(port), "bare"], tmp_path / f"{name}.log", port)
            )
        done = run_cli(
            "compare", "A", "B", "--base-url", servers[0].base_url, "--base-url", servers[1].base_url,
            "--lengths", "200", "--depths", "0,100", "--trials", "1", "--scoring", "strict",
        )  # fmt: skip
    finally:
        for server in servers:
            server.stop()
    assert done.returncode == 0, done.stderr
    html = Path(done.stdout.strip().splitlines()[-1])
    compare = json.loads((html.parent / "compare.json").read_text())
    assert compare["scoring"] == "strict"
    for variant in compare["variants"]:
        assert json.loads((html.parent / variant["run_dir"] / "run.json").read_text())["scoring"] == "strict"
    assert "A: recall 100.0% (Wilson " in done.stderr and ", lenient 100.0%" in done.stderr
    assert "B vs A: 0 flipped miss→pass, 0 pass→miss of 2 paired cases, exact McNemar p = 1" in done.stderr
