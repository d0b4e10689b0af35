"""`compare` checks every variant before the first request: on the real reference engine, a variant its
engine cannot run (tp=2: the reference engine runs in one process) is refused at once, exit 2, in one
line naming the variant, before the valid first variant (fp8) starts a server or writes a run.

Before the fix `compare fp8 fp4` ran every case of fp8 and then exited 2 on fp4 (fp4 is becoming valid
on the reference engine; tp=2 stays invalid for another reason)."""

from __future__ import annotations

import time

from tests.e2e.cli import error_lines, run_cli


def test_an_invalid_later_variant_fails_before_the_first_runs(tmp_path):
    home = tmp_path / "home"
    started = time.perf_counter()
    completed = run_cli(
        "compare", "fp8", "tp=2", "--lengths", "400", "--depths", "50", "--trials", "1", home=home
    )
    elapsed = time.perf_counter() - started
    lines = error_lines(completed)
    assert completed.returncode == 2, completed.stdout + completed.stderr
    assert len(lines) == 1 and "variant 'tp=2'" in lines[0] and "tp must be 1" in lines[0], lines
    assert not home.exists() or not list(home.iterdir())  # no run directory: nothing of fp8 ran
    assert "fp8: run" not in completed.stdout + completed.stderr
    assert elapsed < 60  # a launch and a case would take longer than the check
