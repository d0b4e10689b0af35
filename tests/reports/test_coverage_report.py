"""The indexer coverage section of run and compare reports, from run dirs written through the real store."""

from __future__ import annotations

import io
import json
from pathlib import Path

import numpy as np
import pytest
from matplotlib.image import imread

from recall_eval.compare_store import CompareManifest, CompareVariant, relative_run_dir
from recall_eval.indexer_coverage import with_cause
from recall_eval.types import IndexerCoverage, Outcome, Result
from reports.compare_report import write_compare
from reports.coverage_charts import coverage_view
from reports.html import render_report
from tests.reports.compare_builders import result, run_of, store_run
from tests.reports.dom import parse

LENGTHS = (1000, 4000)
# (outcome, length, per-layer shares): 2 indexer layers
CASES: list[tuple[Outcome, int, tuple[float, float]]] = [
    ("pass", 1000, (1.0, 1.0)),
    ("pass", 1000, (0.5, 1.0)),
    ("miss", 1000, (1.0, 1.0)),  # generation
    ("pass", 4000, (1.0, 0.0)),
    ("miss", 4000, (0.0, 0.0)),  # selection
    ("truncated", 4000, (1.0, 0.25)),  # selection: one of two layers is not most
    ("empty", 4000, (0.75, 0.5)),  # generation
    ("too_long", 4000, (0.0, 0.0)),  # infrastructure: no coverage, never a miss
]


def covered_results(variant: str = "v") -> list[Result]:
    out = []
    for index, (outcome, length, shares) in enumerate(CASES):
        item = result(f"c{index}", outcome, length, variant=variant)
        if item.completion is not None:
            coverage = IndexerCoverage(layers=shares, last_prompt_token=tuple(s > 0 for s in shares))
            item = item.model_copy(update={"coverage": with_cause(coverage, outcome)})
        out.append(item)
    return out


def test_view_averages_per_layer_and_length_and_splits_causes():
    view = coverage_view(covered_results())
    assert view is not None and view.n_layers == 2 and view.cases == 7
    passes, misses = view.grids
    assert passes.counts == (2, 1) and misses.counts == (1, 3)
    assert passes.cells[0] == (0.75, 1.0) and passes.cells[1] == (1.0, 0.0)
    assert misses.cells[0][1] == pytest.approx((0.0 + 1.0 + 0.75) / 3)
    rows = {row.target_tokens: row for row in view.causes}
    assert (rows[1000].misses, rows[1000].selection, rows[1000].generation) == (1, 0, 1)
    assert (rows[4000].misses, rows[4000].selection, rows[4000].generation) == (3, 2, 1)
    assert rows[4000].selection_share == pytest.approx(2 / 3)
    image = imread(io.BytesIO(view.png))
    assert image.shape[0] > 100 and image.shape[1] > 300


def test_no_coverage_means_no_view():
    assert coverage_view([result("a", "pass", 1000), result("b", "miss", 1000)]) is None


def test_run_report_shows_heatmap_and_cause_table(tmp_path: Path):
    run_dir = store_run(tmp_path, run_of("v", LENGTHS), covered_results())
    dom = parse(render_report(run_dir).read_text(encoding="utf-8"))
    section = dom.by_id("coverage-section")
    assert section.by_id("coverage").attrs["data-layers"] == "2"
    assert section.by_id("coverage-heatmap").attrs["src"].startswith("data:image/png;base64,")
    rows = {r.attrs["data-length"]: r.attrs for r in section.find_all("tr", cls="cause-row")}
    assert rows["4000"]["data-selection"] == "2" and rows["4000"]["data-generation"] == "1"
    assert rows["1000"]["data-generation"] == "1"
    total = section.find_all("tr", cls="cause-total")[0].attrs
    assert (total["data-misses"], total["data-selection"], total["data-generation"]) == ("4", "2", "2")
    assert "strictly more than half" in section.find_all("p", cls="coverage-rule")[0].text
    grid = [g for g in section.find_all("table", cls="coverage-grid") if g.attrs["data-group"] == "pass"][0]
    layer0 = grid.find_all("tr", data_layer="0")[0].find_all("td", cls="num")
    assert [float(td.attrs["data-value"]) for td in layer0] == [0.75, 1.0]


def test_run_without_capture_has_no_coverage_section(tmp_path: Path):
    run_dir = store_run(tmp_path, run_of("v", LENGTHS), [result("a", "miss", 1000)])
    html = render_report(run_dir).read_text(encoding="utf-8")
    assert 'id="coverage-section"' not in html


def test_compare_shows_each_variants_coverage_side_by_side(tmp_path: Path):
    run_a = store_run(tmp_path, run_of("fp8", LENGTHS, run_id="run-a"), covered_results("fp8"))
    plain = [r.model_copy(update={"coverage": None, "variant": "bf16"}) for r in covered_results("bf16")]
    run_b = store_run(tmp_path, run_of("bf16", LENGTHS, run_id="run-b"), plain)
    compare_dir = tmp_path / "compare-x"
    manifest = CompareManifest(
        compare_id="x",
        created_at=1_700_000_000.0,
        variants=(
            CompareVariant(label="fp8", run_dir=relative_run_dir(compare_dir, run_a)),
            CompareVariant(label="bf16", run_dir=relative_run_dir(compare_dir, run_b)),
        ),
    )
    dom = parse(write_compare(compare_dir, manifest).read_text(encoding="utf-8"))
    panels = dom.by_id("coverage-section").find_all("div", cls="coverage-variant")
    assert [p.attrs["data-label"] for p in panels] == ["fp8", "bf16"]
    assert panels[0].by_id("coverage-1-heatmap") is not None
    assert panels[1].find_all("p", cls="no-coverage")
    numbers = json.loads((compare_dir / "compare.json").read_text())["numbers"]["variants"]
    by_length = {row["length"]: row for row in numbers[0]["indexer_coverage"]["by_length"]}
    assert (by_length[4000]["selection"], by_length[4000]["generation"]) == (2, 1)
    assert numbers[1]["indexer_coverage"] is None


def test_heatmap_colours_follow_the_shares():
    view = coverage_view(covered_results())
    assert view is not None
    image = imread(io.BytesIO(view.png))[..., :3]
    # a full-coverage cell is the scale's green, an empty miss cell the scale's red: both colours appear
    green, red = np.array([0x0C, 0xD7, 0x9F]) / 255, np.array([0xF0, 0x49, 0x6E]) / 255
    assert (np.abs(image - green).sum(axis=-1) < 0.05).sum() > 200
    assert (np.abs(image - red).sum(axis=-1) < 0.05).sum() > 200


def test_failures_table_names_each_misses_cause(tmp_path: Path):
    run_dir = store_run(tmp_path, run_of("v", LENGTHS), covered_results())
    dom = parse(render_report(run_dir).read_text(encoding="utf-8"))
    causes = {
        row.attrs["data-case-id"]: [pill.attrs["data-cause"] for pill in row.find_all("span", cls="cause")]
        for row in dom.by_id("failures").find_all("tr", cls="failure")
    }
    assert causes == {
        "c2": ["generation"],
        "c4": ["selection"],
        "c5": ["selection"],
        "c6": ["generation"],
        "c7": [],
    }
