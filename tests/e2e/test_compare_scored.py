"""`recall-eval compare A B --base-url U1 --base-url U2` on a scored suite, end to end: two scripted
servers (tests/e2e/scripted_server.py) answer a prepared JSONL file, one with both references of every
row, the other with only one of two on 8 rows of 10. The compare states the per-case score difference
and the Wilcoxon signed-rank test (report, compare.json, console), draws the difference heatmap in mean
score, keeps these cases out of the McNemar table, and --fail-on-regression fails on it.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.cli import run_cli
from tests.e2e.served_process import free_port, start_served
from tests.reports.dom import parse

pytestmark = pytest.mark.slow

SERVER = Path(__file__).with_name("scripted_server.py")
ROWS = 10
HALVED = 8  # rows where server B gives one reference of two: string_match_all 0.5 instead of 1


def _file(tmp_path: Path) -> Path:
    path = tmp_path / "pairs.jsonl"
    rows = [
        {"prompt": f"Record KEY{i:02d} holds ALPHA{i:02d} and BETA{i:02d}. What does KEY{i:02d} hold?",
         "expected": [f"ALPHA{i:02d}", f"BETA{i:02d}"], "task": "pairs"}
        for i in range(ROWS)
    ]  # fmt: skip
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def _answers(tmp_path: Path, name: str, halved: int) -> Path:
    answers = {
        f"KEY{i:02d}": f"ALPHA{i:02d}" if i < halved else f"ALPHA{i:02d} and BETA{i:02d}" for i in range(ROWS)
    }
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps(answers))
    return path


@pytest.fixture
def servers(tmp_path: Path) -> Iterator[list[str]]:
    started = []
    try:
        for name, halved in (("full", 0), ("halved", HALVED)):
            port = free_port()
            argv = [sys.executable, str(SERVER), str(port), str(_answers(tmp_path, name, halved))]
            started.append(start_served(argv, tmp_path / f"{name}.log", port))
        yield [server.base_url for server in started]
    finally:
        for server in started:
            server.stop()


def test_scored_compare_states_the_score_difference_and_gates_on_it(servers, tmp_path):
    suite = f"jsonl:{_file(tmp_path)}"
    done = run_cli(
        "compare", "A", "B", "--base-url", servers[0], "--base-url", servers[1], "--suite", suite,
        "--fail-on-regression",
    )  # fmt: skip
    # every row paired, 8 lower by 0.5 and 2 equal: mean 100 -> 60 on RULER's scale, difference -40;
    # Wilcoxon on the 8 changed pairs, all one way: exact two-sided p = 2 / 2**8
    assert done.returncode == 4, done.stderr
    html = Path(done.stdout.strip().splitlines()[-1])
    numbers = json.loads((html.parent / "compare.json").read_text())["numbers"]
    (pair,) = numbers["pairs"]
    scored = pair["scored"]["by_suite"]["jsonl:pairs"]
    assert (scored["paired"], scored["higher"], scored["lower"], scored["wilcoxon_n"]) == (
        ROWS,
        0,
        HALVED,
        HALVED,
    )
    assert scored["mean_score_a"] == pytest.approx(1.0) and scored["mean_score_b"] == pytest.approx(0.6)
    assert scored["mean_diff"] == pytest.approx(-0.4) and scored["p_value"] == pytest.approx(2 / 2**8)
    # t interval by hand: sd of the differences sqrt(0.4 / 9), t(0.975, 9 df) = 2.2622
    half = 2.2622 * (0.4 / 9) ** 0.5 / ROWS**0.5
    assert scored["mean_diff_ci95"] == pytest.approx([-0.4 - half, -0.4 + half], abs=1e-4)
    assert pair["overall"]["paired"] == 0  # the scored cases are not in the McNemar test
    # the console summary and the gate line state the same test
    said = done.stdout + done.stderr
    assert "B vs A, jsonl:pairs: mean score 100.0 → 60.0 (-40.0" in said
    assert "Wilcoxon signed-rank p = 0.0078 (n = 8)" in said
    gate = [line for line in done.stderr.splitlines() if line.startswith("variant B, jsonl:pairs:")]
    assert gate and "(--fail-on-regression)" in gate[0] and "against A" in gate[0]
    # the report: conclusion, the suite's scored table, the scored paired table, the mean-score diff map
    document = parse(html.read_text())
    verdict = document.by_id("verdict").text
    assert "B scores lower than A on jsonl:pairs" in verdict and "n = 8" in verdict
    (row,) = document.by_id("scored-tests").find_all("tr", data_scope="all")
    assert row.attrs["data-n"] == "8" and float(row.attrs["data-mean-diff"]) == pytest.approx(-0.4)
    (summary,) = document.find_all("table", cls="scored")
    assert summary.attrs["data-suite"] == "jsonl:pairs"
    (diff,) = document.find_all("img", cls="diff-heatmap")
    assert "mean score difference" in diff.attrs["alt"]
