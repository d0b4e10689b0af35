"""A no-context baseline is shown beside its suite, never pooled into a headline, an effective length
or a gate: `--suite needle,needle~nocontext` on the real reference engine.

Proves: with --fail-under 0.9 the run exits 0 (the reference model finds every needle, and knows none
of them without the haystack: pooled, recall would be ~50% and the gate would exit 4); the console's
headline recall and effective length are needle's alone, the baseline's own figure follows it marked
`baseline`; the report's headline card states needle's recall; a per-suite gate on the baseline is
refused before anything starts (exit 2)."""

from __future__ import annotations

import re

from recall_eval.store import load_run
from tests.e2e.cli import error_lines, run_cli


def test_baseline_is_beside_its_suite_not_in_the_headline_or_the_gate(tmp_path):
    out = tmp_path / "runs"
    completed = run_cli(
        "sweep", "--suite", "needle,needle~nocontext", "--lengths", "400,800", "--depths", "50",
        "--trials", "2", "--fail-under", "0.9", "--out", str(out),
    )  # fmt: skip
    console = completed.stdout + completed.stderr
    assert completed.returncode == 0, console
    (run_dir,) = out.iterdir()
    _, results = load_run(run_dir)
    needle = [r for r in results if r.suite == "needle"]
    baseline = [r for r in results if r.suite == "needle~nocontext"]
    assert len(needle) == 4 and len(baseline) == 4
    assert all(r.outcome == "pass" for r in needle), [r.outcome for r in needle]
    assert not any(r.outcome == "pass" for r in baseline)  # the model cannot know a random code
    line = next(line for line in console.splitlines() if "recall" in line and "effective length" in line)
    assert re.search(r"recall 100\.0%.*4 passed of 4 answered", line), line
    assert "pooled" not in line and "effective length needle 800" in line, line
    assert "baseline needle~nocontext 0.0%" in line, line
    html = (run_dir / "report.html").read_text()
    assert re.search(r'id="summary-recall" data-passes="4" data-answered="4"', html)

    refused = run_cli(
        "sweep", "--suite", "needle,needle~nocontext", "--lengths", "400", "--fail-under",
        "needle~nocontext=0.1", "--out", str(tmp_path / "refused"),
    )  # fmt: skip
    lines = error_lines(refused)
    assert refused.returncode == 2 and len(lines) == 1 and "no-context baseline" in lines[0], lines
    assert not (tmp_path / "refused").exists() or not any((tmp_path / "refused").iterdir())
