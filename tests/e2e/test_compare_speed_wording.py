"""The compare's speed wording through real servers: two real_world_server processes compared with their
requests interleaved (`compare A B --base-url .. --base-url ..`). For every speed metric in compare.json
the per-case interval excludes 0 exactly when its sign test's p is below 0.05 (one test for both), and the
conclusion never puts "not significant" beside an interval that excludes 0; over two suites it names each
suite's own effective length, never a pooled figure as one variant's."""

from __future__ import annotations

import json
import re
from pathlib import Path

from recall_eval.stats import SIGNIFICANCE
from tests.e2e.cli import run_cli
from tests.e2e.test_real_world_servers import served  # noqa: F401 (the fixture)


def test_interval_and_significance_agree_on_live_servers(served, tmp_path):  # noqa: F811
    a, b = served("--tokenize"), served("--tokenize")
    completed = run_cli(
        "compare", "A", "B", "--base-url", a.url, "--base-url", b.url, "--suite", "needle,multiturn",
        "--lengths", "300,600", "--depths", "0,50,100", "--trials", "2", home=tmp_path / "home",
    )  # fmt: skip
    assert completed.returncode in (0, 4), completed.stderr
    html = Path(completed.stdout.strip().splitlines()[-1])
    stored = json.loads((html.parent / "compare.json").read_text())
    pair = stored["numbers"]["pairs"][0]
    assert pair["interleaved"] is True
    checked = 0
    for name, change in pair["speed_changes"].items():
        if change["p_value"] is None or change["ci_low_pct"] is None:
            continue
        excludes_zero = change["ci_low_pct"] > 0 or change["ci_high_pct"] < 0
        assert excludes_zero == (change["p_value"] < SIGNIFICANCE), (name, change)
        checked += 1
    assert checked >= 1, pair["speed_changes"]
    verdict = stored["verdict"]
    for clause in re.findall(r"[^,:]*\(95% CI [^)]*\), not significant", verdict):
        bounds = re.search(r"CI ([+-]?[\d.]+)% to ([+-]?[\d.]+)%", clause.replace("\u2212", "-"))
        assert bounds is not None, clause
        low, high = float(bounds.group(1)), float(bounds.group(2))
        assert low <= 0 <= high, clause
    assert "effective length" not in verdict or "needle" in verdict.split("effective length")[1][:40], verdict
