"""render_report on a run dir written through the real store: numbers, escaping, infra cells, files."""

from __future__ import annotations

import base64
import json
import random
import statistics
from pathlib import Path

import pytest

from recall_eval.errors import UserError
from recall_eval.stats import wilson_interval
from recall_eval.store import RESULTS_FILE, RunStore
from recall_eval.types import Run, RunSpec
from reports.__main__ import main as reports_main
from reports.html import render_report
from tests.reports.dom import Element, parse
from tests.reports.sample_run import IMG_ANSWER, SCRIPT_ANSWER, build_sample_run


def raw_results(run_dir: Path) -> list[dict]:
    """results.jsonl read as plain JSON, independent of the report code."""
    lines = (run_dir / RESULTS_FILE).read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines if line.strip()]


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, Element]:
    run_dir = build_sample_run(tmp_path_factory.mktemp("runs"))
    report = render_report(run_dir)
    html = report.read_text(encoding="utf-8")
    return run_dir, html, parse(html)


def test_report_and_pngs_are_written_next_to_the_results(rendered: tuple[Path, str, Element]) -> None:
    run_dir, _, dom = rendered
    assert (run_dir / "report.html").is_file()
    png = (run_dir / "heatmap-needle.png").read_bytes()
    assert png.startswith(b"\x89PNG\r\n\x1a\n")
    img = dom.by_id("heatmap-needle")
    prefix = "data:image/png;base64,"
    assert img.attrs["src"].startswith(prefix)
    assert base64.b64decode(img.attrs["src"][len(prefix) :]) == png


def test_summary_numbers_match_results_jsonl(rendered: tuple[Path, str, Element]) -> None:
    run_dir, _, dom = rendered
    rows = raw_results(run_dir)
    answered = [r for r in rows if r["outcome"] in ("pass", "miss", "empty", "truncated")]
    passes = sum(r["outcome"] == "pass" for r in rows)
    card = dom.by_id("summary-recall")
    assert int(card.attrs["data-passes"]) == passes == 24
    assert int(card.attrs["data-answered"]) == len(answered) == 29
    assert float(card.attrs["data-recall"]) == pytest.approx(passes / len(answered))
    low, high = wilson_interval(passes, len(answered))
    assert float(card.attrs["data-ci-low"]) == pytest.approx(low)
    assert float(card.attrs["data-ci-high"]) == pytest.approx(high)
    assert "82.8%" in card.text and "65.5%–92.4%" in card.text
    # 338: 10/10, 1,000: 9/9 (one OOM left out), 4,509: 5/10 -> recall holds up to 1,000
    assert dom.by_id("summary-effective-length").attrs["data-value"] == "1000"
    counts = {
        row.attrs["data-outcome"]: int(row.attrs["data-count"])
        for row in dom.find_all("tr", cls="outcome-count")
    }
    for outcome in ("pass", "miss", "empty", "truncated", "too_long", "oom", "crash", "timeout", "error"):
        assert counts[outcome] == sum(r["outcome"] == outcome for r in rows), outcome
    assert counts["too_long"] == 10 and counts["oom"] == 1
    note = dom.by_id("infra-note").text
    assert "not counted as recall" in note and "11 cases" in note


def test_model_output_is_escaped(rendered: tuple[Path, str, Element]) -> None:
    _, html, dom = rendered
    assert "<script" not in html.lower()  # the page has no scripts at all
    assert "<img src=x" not in html
    assert "&lt;script&gt;document.body.setAttribute" in html
    answers = [cell.text.strip() for cell in dom.find_all("td", cls="answer")]
    assert SCRIPT_ANSWER in answers and IMG_ANSWER in answers


def test_infrastructure_cells_are_labelled_not_counted_as_misses(rendered: tuple[Path, str, Element]) -> None:
    _, _, dom = rendered
    cells = {
        (int(c.attrs["data-length"]), float(c.attrs["data-depth"])): c for c in dom.find_all("td", cls="cell")
    }
    assert len(cells) == 4 * 5
    for depth in (0.0, 25.0, 50.0, 75.0, 100.0):
        too_long = cells[(22597, depth)]
        assert "cell-infra" in too_long.attrs["class"].split()
        assert too_long.attrs["data-label"] == "too long"
        assert too_long.attrs["data-answered"] == "0" and too_long.attrs["data-recall"] == ""
    partial = cells[(1000, 75.0)]
    assert (partial.attrs["data-passes"], partial.attrs["data-answered"], partial.attrs["data-infra"]) == (
        "1",
        "1",
        "1",
    )
    assert "+1 OOM" in partial.text and "cell-infra" not in partial.attrs["class"]
    assert cells[(4509, 25.0)].attrs["data-recall"] == "0.0"


def test_throughput_rows_match_results_jsonl(rendered: tuple[Path, str, Element]) -> None:
    run_dir, _, dom = rendered
    rows = raw_results(run_dir)
    table = {int(r.attrs["data-length"]): r for r in dom.find_all("tr", cls="throughput-row")}
    assert sorted(table) == [338, 1000, 4509, 22597]
    for length in (338, 1000, 4509):
        timed = [r["completion"] for r in rows if r["target_tokens"] == length and r["completion"]]
        ttft = [c["ttft_s"] for c in timed]
        prefill = [c["prompt_tokens"] / c["ttft_s"] for c in timed]
        decode = [
            (c["completion_tokens"] - 1) / sum(c["itl_s"]) for c in timed if c["completion_tokens"] >= 2
        ]
        row = table[length]
        assert float(row.attrs["data-ttft-p50"]) == pytest.approx(statistics.median(ttft))
        assert float(row.attrs["data-prefill-tps"]) == pytest.approx(statistics.median(prefill))
        assert float(row.attrs["data-decode-tps"]) == pytest.approx(statistics.median(decode))
    assert table[22597].attrs["data-ttft-p50"] == "" and "–" in table[22597].text


def test_failures_table_lists_every_non_pass(rendered: tuple[Path, str, Element]) -> None:
    run_dir, _, dom = rendered
    rows = raw_results(run_dir)
    failed = dom.find_all("tr", cls="failure")
    assert sorted(r.attrs["data-case-id"] for r in failed) == sorted(
        r["case_id"] for r in rows if r["outcome"] != "pass"
    )
    oom = [r for r in failed if r.attrs["data-outcome"] == "oom"][0]
    assert "CUDA out of memory" in oom.text and "ZEBRA-" in oom.text


def test_metadata_tables(rendered: tuple[Path, str, Element]) -> None:
    _, html, dom = rendered
    run_table = dom.by_id("run-table").text
    assert "20250101-000000-abcdef" in run_table and "3.25 s" in run_table
    assert "server:/v1/tokenize (40 cases)" in run_table
    profile = dom.by_id("profile-table").text
    assert "reference-cpu" in profile and "512" in profile and "fp8" in profile
    assert "hf_secret_value" not in html and "(hidden)" in profile and "OMP_NUM_THREADS" in profile
    assert "338, 1000, 4509, 22597" in dom.by_id("spec-table").text
    # request settings under their declared labels, once (not repeated in the spec table)
    settings = dom.by_id("settings-table").text
    assert "request timeout (s)" in settings and "reasoning effort" in settings and "extra body" in settings
    assert "request_timeout_s" not in dom.by_id("spec-table").text
    assert "max_total_tokens" in dom.by_id("server-info").text
    assert "3.11.2" in dom.by_id("versions-table").text
    assert dom.by_id("run-status").attrs["data-status"] == "finished"
    assert "status-banner" not in html


def test_self_contained(rendered: tuple[Path, str, Element]) -> None:
    _, html, dom = rendered
    assert not dom.find_all("link") and not dom.find_all("script")
    for el in dom.iter():
        for attr in ("src", "href"):
            assert not el.attrs.get(attr, "data:").lower().startswith(("http:", "https:", "//", "file:")), el
    assert "url(" not in html and "@import" not in html


def test_report_does_not_depend_on_result_order_and_is_stable(tmp_path: Path) -> None:
    run_dir = build_sample_run(tmp_path)
    first = render_report(run_dir).read_bytes()
    assert render_report(run_dir).read_bytes() == first
    results = run_dir / RESULTS_FILE
    lines = results.read_text(encoding="utf-8").splitlines(keepends=True)
    random.Random(1).shuffle(lines)  # as a resumed or concurrent run may store them
    results.write_text("".join(lines), encoding="utf-8")
    assert render_report(run_dir).read_bytes() == first


def test_interrupted_run_gets_a_banner(tmp_path: Path) -> None:
    run_dir = build_sample_run(tmp_path, status="interrupted")
    dom = parse(render_report(run_dir).read_text(encoding="utf-8"))
    banner = dom.by_id("status-banner").text
    assert "interrupted" in banner and "40 cases stored" in banner


def test_missing_run_dir_is_a_user_error(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="does not exist"):
        render_report(tmp_path / "nope")
    (tmp_path / "empty").mkdir()
    with pytest.raises(UserError, match="not a run directory"):
        render_report(tmp_path / "empty")


def test_run_without_results_renders(tmp_path: Path) -> None:
    spec = RunSpec(lengths=(1000, 2000), depths=(0.0, 100.0))
    store = RunStore.create(Run(run_id="empty-run", spec=spec, created_at=0.0), tmp_path)
    dom = parse(render_report(store.path).read_text(encoding="utf-8"))
    assert dom.by_id("summary-recall").attrs["data-answered"] == "0"
    assert dom.by_id("summary-effective-length").attrs["data-value"] == ""
    assert {c.text.strip() for c in dom.find_all("td", cls="cell")} == {"–"}
    assert dom.by_id("failures-none").text == "No results stored yet."
    assert "running" in dom.by_id("status-banner").text


def test_module_entry_point(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run_dir = build_sample_run(tmp_path)
    assert reports_main([str(run_dir)]) == 0
    assert capsys.readouterr().out.strip() == str(run_dir / "report.html")
    assert reports_main([str(tmp_path / "missing")]) == 2  # a wrong path is bad input
    assert "does not exist" in capsys.readouterr().err
