"""What the command line says at its edges: `--open` where no browser can open says so and where the
file is (it used to say nothing); `report --help` does not describe an option report lacks; `--max-tokens`
help does not claim one budget where RULER's tasks and mrcr have their own."""

from __future__ import annotations

import subprocess

from tests.e2e.cli import cli_argv, cli_env, run_cli
from tests.reports.sample_run import build_sample_run


def test_open_without_a_display_says_so_and_where_the_report_is(tmp_path):
    run_dir = build_sample_run(tmp_path / "runs")
    env = {k: v for k, v in cli_env().items() if k not in ("DISPLAY", "WAYLAND_DISPLAY", "BROWSER")}
    completed = subprocess.run(
        cli_argv("report", str(run_dir), "--open"), capture_output=True, text=True, env=env, timeout=300
    )
    assert completed.returncode == 0, completed.stderr
    note = [line for line in completed.stderr.splitlines() if "--open" in line]
    assert note, completed.stderr
    assert "no display" in note[0] and (run_dir / "report.html").resolve().as_uri() in note[0], note


def test_help_texts_say_what_each_command_does():
    report = " ".join(run_cli("report", "--help").stdout.split())
    assert "--scoring" in report and "--fail-under" not in report, report
    sweep = " ".join(run_cli("sweep", "--help").stdout.split())
    assert "RULER's tasks and mrcr their own" in sweep, sweep
    assert "--probe-timeout" in sweep and "(default: 10)" in sweep.split("--probe-timeout", 1)[1][:400]
