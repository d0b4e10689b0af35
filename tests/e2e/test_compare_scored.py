"""`recall-eval compare A B --base-url U1 --base-url U2` on a scored suite, end to end: two scripted
servers (tests/e2e/scripted_server.py) answer a prepared JSONL file, one with both references of every
row, the other with only one of two on 8 rows of 10. The compare states the per-case score difference
and the Wilcoxon signed-rank test (report, compare.json, console), draws the difference heatmap in mean
score, keeps these cases out of the McNemar table, and --fail-on-regression fails on it.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.cli import run_cli
from tests.e2e.served_process import start_scripted
from tests.reports.dom import parse

pytestmark = pytest.mark.slow

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


def _answers(halved: int) -> dict[str, str]:
    return {
        f"KEY{i:02d}": f"ALPHA{i:02d}" if i < halved else f"ALPHA{i:02d} and BETA{i:02d}" for i in range(ROWS)
    }


@pytest.fixture
def servers(tmp_path: Path) -> Iterator[list[str]]:
    started = []
    try:
        for name, halved in (("full", 0), ("halved", HALVED)):
            started.append(start_scripted(_answers(halved), tmp_path, name))
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


def test_scored_cases_stay_out_of_recall_in_variants_lengths_runs_and_run_report(servers, tmp_path):
    """A compare of a pass/miss suite (needle: the scripted servers answer "no idea", all misses) and the
    scored file: recall, its effective length and recall by length are over the needle cases only, the
    file's scores stand beside them (mean, RULER effective length, by length); the same in `runs` and in
    each run's own report. Pooling them as pass/miss made A's recall 10/12 and its effective length the
    file's length."""
    suite = f"needle,jsonl:{_file(tmp_path)}"
    done = run_cli(
        "compare", "A", "B", "--base-url", servers[0], "--base-url", servers[1], "--suite", suite,
        "--lengths", "600", "--depths", "50", "--trials", "2",
    )  # fmt: skip
    html = Path(done.stdout.strip().splitlines()[-1])
    assert html.name == "compare.html", done.stderr
    computed = json.loads((html.parent / "compare.json").read_text())
    a, b = computed["numbers"]["variants"]
    assert a["cases"] == ROWS + 2 and (a["passes"], a["answered"], a["recall"]) == (0, 2, 0.0)
    assert a["effective_length"] is None and list(a["effective_length_by_suite"]) == ["needle"]
    assert a["score"]["mean"] == pytest.approx(1.0) and b["score"]["mean"] == pytest.approx(0.6)
    assert a["score"]["answered"] == b["score"]["answered"] == ROWS
    (file_length,) = {int(n) for n in a["score"]["by_length"]}  # every row has the same words
    assert (
        a["score"]["ruler_effective_length"] == file_length and b["score"]["ruler_effective_length"] is None
    )
    # recall by length: the file's length has no pass/miss case, so no recall there
    by_length = {row["length"]: row for row in a["per_length"]}
    assert by_length[file_length]["answered"] == 0 and by_length[file_length]["recall"] is None
    assert sum(row["answered"] for row in a["per_length"]) == 2
    document = parse(html.read_text())
    rows = {
        row.attrs["data-label"]: row
        for row in document.by_id("variants-table").find_all("tr", cls="variant-row")
    }
    assert rows["A"].attrs["data-answered"] == "2" and rows["A"].attrs["data-effective-length"] == ""
    assert float(rows["B"].attrs["data-score"]) == pytest.approx(0.6)
    assert rows["A"].attrs["data-ruler-effective-length"] == str(file_length)
    assert "pass/miss suites" in document.by_id("recall-head").text
    cells = document.by_id("length-scores").find_all("td", data_variant="B")
    assert [float(cell.attrs["data-score"]) for cell in cells] == pytest.approx([0.6])
    recall_rows = document.by_id("length-recall").find_all("tr", cls="length-row")
    assert [row.attrs["data-length"] for row in recall_rows] == ["600"]  # none for the file's length
    # `runs`: recall of the needle cases, the file's score beside it
    listed = run_cli("runs", "--json")
    assert listed.returncode == 0, listed.stderr
    runs = {run["variant"]: run for run in json.loads(listed.stdout)["runs"]}
    assert (runs["A"]["passes"], runs["A"]["answered"]) == (0, 2) and runs["B"]["score"] == pytest.approx(0.6)
    table = run_cli("runs")
    line = next(line for line in table.stdout.splitlines() if " B " in line and "needle" in line)
    assert "0.0% (0/2), score 60.0" in line, line
    # each run's own report: the per-length table's recall leaves the file's cases out
    run_dir = html.parent / json.loads((html.parent / "compare.json").read_text())["variants"][0]["run_dir"]
    report = parse((run_dir / "report.html").read_text())
    lengths = {row.attrs["data-length"]: row for row in report.find_all("tr", cls="throughput-row")}
    assert lengths[str(file_length)].attrs["data-recall"] == ""
