"""The compare report in a real headless Chromium: every image decodes, the numbers are the DOM's."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.reports.dom import Element, parse
from tests.reports.test_browser import chromium, with_probe
from tests.reports.test_compare_report import BASELINE, LABEL_B, build_compare

pytestmark = pytest.mark.browser


def open_in_chromium(compare_html: Path, tmp: Path) -> tuple[Element, list[dict]]:
    """The DOM Chromium built from the report (plus a load-time probe of its images)."""
    page = with_probe(compare_html, compare_html.with_name("probe.html"))
    dom = parse(chromium(tmp, "--dump-dom", page.as_uri()))
    return dom, json.loads(dom.find_all("html")[0].attrs["data-probe"])


def check_compare_page(dom: Element, images: list[dict], labels: list[str], suites: list[str]) -> None:
    """Structure every compare report has, whatever the recall numbers."""
    n_pairs = len(labels) - 1
    assert len(images) == len(suites) * (len(labels) + n_pairs) + 1  # heatmaps, diffs, length chart
    for image in images:
        assert image["complete"] and image["naturalWidth"] > 300 and image["visible"], image
        assert image["width"] > 200 and image["height"] > 150, image
    assert dom.by_id("verdict").text.strip()
    assert [r.attrs["data-label"] for r in dom.find_all("tr", cls="variant-row")] == labels
    assert [s.attrs["data-suite"] for s in dom.find_all("section", cls="suite-compare")] == suites
    pairs = {row.attrs["data-pair"] for row in dom.find_all("tr", cls="paired-row")}
    assert pairs == {f"{label}|{labels[0]}" for label in labels[1:]}
    for row in dom.find_all("tr", cls="paired-row"):
        assert 0.0 <= float(row.attrs["data-p"]) <= 1.0
    metrics = [row.attrs["data-metric"] for row in dom.find_all("tr", cls="throughput-metric")]
    assert metrics == ["ttft_s", "prefill_tps", "decode_tps"]
    assert [r.attrs["data-metric"] for r in dom.find_all("tr", cls="server-metric")] == [
        "time_to_ready_s",
        "max_total_num_tokens",
        "kv_bytes_per_token",
    ]


def test_compare_report_opens_in_chromium(tmp_path: Path) -> None:
    compare_dir = build_compare(tmp_path / "runs")
    dom, images = open_in_chromium(compare_dir / "compare.html", tmp_path)
    check_compare_page(dom, images, [BASELINE, LABEL_B], ["needle"])
    assert len(dom.find_all("script")) == 1  # only the probe: the label's <script> stayed text
    assert LABEL_B in dom.by_id("compare-title").text
    assert dom.by_id("verdict").text.startswith(f"{LABEL_B} raises recall over {BASELINE}")


def test_side_by_side_heatmaps_keep_readable_labels_at_1400px(tmp_path: Path) -> None:
    """The default grid (8 lengths) drawn side by side must not shrink: tick labels are 8 pt at 110 dpi
    (12.2 px as drawn), so an image shown below 74% of its width has labels under 9 px."""
    from recall_eval.compare_store import CompareManifest, CompareVariant, relative_run_dir
    from reports.compare_report import write_compare
    from tests.reports.compare_builders import paired_results, run_of, store_run

    lengths = [338, 650, 1250, 2400, 4600, 8900, 17000, 22597]
    a, b = paired_results([("pass", "pass", n) for n in lengths for _ in range(3)])
    root = tmp_path / "runs"
    run_a = store_run(root, run_of("fp8", lengths, (0.0, 50.0, 100.0), run_id="run-a"), a)
    run_b = store_run(root, run_of("bf16", lengths, (0.0, 50.0, 100.0), dtype="bf16", run_id="run-b"), b)
    compare_dir = root / "compare-wide"
    variants = tuple(
        CompareVariant(label=label, run_dir=relative_run_dir(compare_dir, run))
        for label, run in (("fp8", run_a), ("bf16", run_b))
    )
    write_compare(compare_dir, CompareManifest(compare_id="wide", created_at=0.0, variants=variants))
    page = with_probe(compare_dir / "compare.html", compare_dir / "probe.html")
    dom = parse(chromium(tmp_path, "--window-size=1400,3000", "--dump-dom", page.as_uri()))
    images = json.loads(dom.find_all("html")[0].attrs["data-probe"])
    side_by_side = [image for image in images if image["naturalWidth"] > 1000]
    assert len(side_by_side) >= 2, images
    for image in side_by_side:
        assert image["width"] >= 0.74 * image["naturalWidth"], image
