"""The compare report renders from two run directories written with the real store."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from scipy.stats import binomtest

from recall_eval.compare_store import (
    COMPARE_FILE,
    CompareManifest,
    CompareVariant,
    read_manifest,
    relative_run_dir,
)
from recall_eval.errors import UserError
from recall_eval.types import Outcome
from reports.compare_report import render_compare, write_compare
from tests.reports.compare_builders import paired_results, result, run_of, store_run
from tests.reports.dom import Element, parse

LENGTHS = (1000, 2000, 4509, 8000)
BASELINE = "fp8"
LABEL_B = "bf16<script>alert(1)</script>"  # labels are user text: must come out escaped


def build_compare(root: Path) -> Path:
    """Two stored runs (fp8 loses recall from 4,509 up, with one OOM) and a compare dir naming them."""
    pairs: list[tuple[Outcome, Outcome, int]] = []
    for length in LENGTHS[:2]:
        pairs += [("pass", "pass", length)] * 6
    pairs += [("miss", "pass", 4509)] * 6
    pairs += [("miss", "pass", 8000)] * 5 + [("oom", "pass", 8000)] + [("pass", "miss", 8000)]
    a, b = paired_results(pairs, b_speed=1.1)
    info_a = {
        "server_info": {"max_total_num_tokens": 100_000, "kv_bytes_per_token": 132, "index_k_dtype": "fp8"}
    }
    info_b = {
        "max_total_num_tokens": 87_000,
        "kv_bytes_per_token": 256,
        "index_k_dtype": "bf16",
        "index_topk": 512,
    }
    run_a = store_run(
        root, run_of(BASELINE, LENGTHS, (0.0, 50.0, 100.0), server_info=info_a, run_id="run-a"), a
    )
    run_b = store_run(
        root,
        run_of("bf16", LENGTHS, (0.0, 50.0, 100.0), dtype="bf16", server_info=info_b, run_id="run-b"),
        b,
    )
    compare_dir = root / "compare-test"
    manifest = CompareManifest(
        compare_id="test",
        created_at=1_700_000_000.0,
        command="recall-eval compare fp8 bf16",
        variants=(
            CompareVariant(label=BASELINE, run_dir=relative_run_dir(compare_dir, run_a)),
            CompareVariant(label=LABEL_B, run_dir=relative_run_dir(compare_dir, run_b), reused=True),
        ),
    )
    write_compare(compare_dir, manifest)
    return compare_dir


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, Element]:
    compare_dir = build_compare(tmp_path_factory.mktemp("compare"))
    html = (compare_dir / "compare.html").read_text(encoding="utf-8")
    return compare_dir, html, parse(html)


def test_files_written(rendered: tuple[Path, str, Element]) -> None:
    compare_dir, _, _ = rendered
    assert (compare_dir / "compare.html").is_file()
    assert (compare_dir / "diff-needle-1.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    stored = json.loads((compare_dir / COMPARE_FILE).read_text())
    assert [v["run_dir"] for v in stored["variants"]] == ["../run-a", "../run-b"]
    assert stored["numbers"]["pairs"][0]["overall"]["miss_to_pass"] == 11


def test_verdict_at_the_top(rendered: tuple[Path, str, Element]) -> None:
    _, _, dom = rendered
    text = dom.by_id("verdict").text
    expected_p = f"p = {binomtest(1, 12, 0.5).pvalue:.2g}"  # 0.0063
    assert text.startswith(f"{LABEL_B} raises recall over fp8 from 4,509 tokens up: 11 cases flip miss→pass")
    assert f"1 pass→miss, {expected_p} (recall 54% → 96%)" in text
    assert "decode speed +10.0%" in text and "KV slots -13.0%" in text
    assert "1 pair left out of the test for infrastructure outcomes (fp8: 1 oom" in text


def test_labels_are_escaped(rendered: tuple[Path, str, Element]) -> None:
    _, html, dom = rendered
    assert "<script>" not in html
    assert "&lt;script&gt;" in html
    assert not dom.find_all("script")


def test_variant_rows_and_reuse(rendered: tuple[Path, str, Element]) -> None:
    _, _, dom = rendered
    rows = {row.attrs["data-label"]: row for row in dom.find_all("tr", cls="variant-row")}
    assert list(rows) == [BASELINE, LABEL_B]
    a, b = rows[BASELINE].attrs, rows[LABEL_B].attrs
    # fp8: 12 + 0 + 1 passes of 12 + 6 + 6 answered (the OOM is not answered); bf16 passes all but one.
    assert (a["data-passes"], a["data-answered"], a["data-cases"]) == ("13", "24", "25")
    assert (b["data-passes"], b["data-answered"]) == ("24", "25")
    # bf16 has 6 of 7 at 8,000 tokens (86% < 90%), so its effective length ends at 4,509.
    assert (a["data-effective-length"], b["data-effective-length"]) == ("2000", "4509")
    assert (a["data-reused"], b["data-reused"]) == ("false", "true")
    links = [el.attrs["href"] for el in dom.by_id("variants-table").find_all("a")]
    assert links == ["../run-a/report.html", "../run-b/report.html"]


def test_heatmaps_side_by_side_and_difference(rendered: tuple[Path, str, Element]) -> None:
    _, _, dom = rendered
    section = dom.by_id("suite-needle")
    heatmaps = section.find_all("img", cls="heatmap")
    assert [img.attrs["data-variant"] for img in heatmaps] == [BASELINE, LABEL_B]
    diffs = section.find_all("img", cls="diff-heatmap")
    assert [(img.attrs["data-variant"], img.attrs["data-baseline"]) for img in diffs] == [(LABEL_B, BASELINE)]
    for img in heatmaps + diffs + [dom.by_id("length-chart")]:
        assert img.attrs["src"].startswith("data:image/png;base64,")


def test_per_length_recall_with_wilson_intervals(rendered: tuple[Path, str, Element]) -> None:
    _, _, dom = rendered
    assert len(dom.by_id("length-recall").find_all("td", cls="length-cell")) == 2 * len(LENGTHS)
    row_8000 = [r for r in dom.find_all("tr", cls="length-row") if r.attrs["data-length"] == "8000"][0]
    fp8_cell = row_8000.find_all("td", cls="length-cell", data_variant=BASELINE)[0]
    assert (fp8_cell.attrs["data-passes"], fp8_cell.attrs["data-answered"]) == ("1", "6")
    ci = binomtest(1, 6).proportion_ci(method="wilson")
    # stats uses z = 1.96, scipy the exact quantile 1.95996...: equal to about 1e-5.
    assert float(fp8_cell.attrs["data-ci-low"]) == pytest.approx(ci.low, abs=1e-4)
    assert float(fp8_cell.attrs["data-ci-high"]) == pytest.approx(ci.high, abs=1e-4)


def test_paired_rows_overall_and_per_length(rendered: tuple[Path, str, Element]) -> None:
    _, _, dom = rendered
    rows = {row.attrs["data-scope"]: row.attrs for row in dom.find_all("tr", cls="paired-row")}
    assert list(rows) == ["all", "length:1000", "length:2000", "length:4509", "length:8000"]
    overall = rows["all"]
    assert (overall["data-gained"], overall["data-lost"], overall["data-excluded"]) == ("11", "1", "1")
    assert float(overall["data-p"]) == pytest.approx(binomtest(1, 12, 0.5).pvalue)
    at_8000 = rows["length:8000"]
    assert (at_8000["data-gained"], at_8000["data-lost"], at_8000["data-paired"]) == ("5", "1", "6")
    assert float(at_8000["data-p"]) == pytest.approx(binomtest(1, 6, 0.5).pvalue)


def test_throughput_and_server_side_by_side(rendered: tuple[Path, str, Element]) -> None:
    _, _, dom = rendered
    decode = dom.by_id("throughput-compare").find_all("tr", data_metric="decode_tps")[0]
    values = [float(td.attrs["data-value"]) for td in decode.find_all("td") if "data-value" in td.attrs]
    assert values == pytest.approx([50.0, 55.0])
    change = decode.find_all("td", cls="change")[0]
    assert float(change.attrs["data-change"]) == pytest.approx(10.0)
    assert change.text.strip() == "+10.0%"
    # sequential runs: a per-case interval, no sign test (the cases of two runs are not exchangeable)
    assert not decode.find_all("td", cls="sign-test")
    assert dom.by_id("throughput-order").attrs["data-interleaved"] == "false"
    case = decode.find_all("td", cls="case-change")[0].attrs
    assert case["data-cases"] == "24"  # the OOM case was timed under B only
    assert float(case["data-median"]) == pytest.approx(10.0)
    server = dom.by_id("server-compare")
    kv = server.find_all("tr", data_metric="kv_bytes_per_token")[0]
    assert [td.attrs["data-value"] for td in kv.find_all("td") if "data-value" in td.attrs] == ["132", "256"]
    slots = server.find_all("tr", data_metric="max_total_num_tokens")[0]
    assert "-13.0%" in slots.text
    settings = {
        row.attrs["data-setting"]: row
        for row in dom.by_id("server-settings").find_all("tr", cls="server-setting")
    }
    dtypes = [td.attrs["data-value"] for td in settings["index_k_dtype"].find_all("td")]
    assert dtypes == ["fp8", "bf16"]
    topk = [td.attrs["data-value"] for td in settings["index_topk"].find_all("td")]
    assert topk == ["unknown", "512"] and "unknown" in settings["index_topk"].text


def test_self_contained(rendered: tuple[Path, str, Element]) -> None:
    _, _, dom = rendered
    for el in dom.iter():
        for attr in ("src", "href"):
            value = el.attrs.get(attr, "")
            assert not value.startswith(("http:", "https:", "//")), value
    assert not dom.find_all("link")


def test_render_compare_rerenders_from_compare_json(tmp_path: Path) -> None:
    compare_dir = build_compare(tmp_path)
    first = json.loads((compare_dir / COMPARE_FILE).read_text())
    (compare_dir / "compare.html").unlink()
    render_compare(compare_dir)
    second = json.loads((compare_dir / COMPARE_FILE).read_text())
    assert (compare_dir / "compare.html").is_file()
    assert first["numbers"] == second["numbers"] and first["verdict"] == second["verdict"]
    assert first["variants"] == second["variants"]


def test_not_a_compare_dir_is_a_user_error(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="is not a compare directory"):
        render_compare(tmp_path)


def test_three_variants_each_against_the_first(tmp_path: Path) -> None:
    a, b = paired_results([("miss", "pass", 1000)] * 3 + [("pass", "pass", 2000)] * 3)
    _, c = paired_results([("miss", "miss", 1000)] * 3 + [("pass", "miss", 2000)] * 3)
    dirs = [
        store_run(tmp_path, run_of(label, (1000, 2000), (0.0, 50.0, 100.0), run_id=f"r-{label}"), results)
        for label, results in (("A", a), ("B", b), ("C", c))
    ]
    compare_dir = tmp_path / "compare-3"
    manifest = CompareManifest(
        compare_id="3",
        created_at=1_700_000_000.0,
        variants=tuple(
            CompareVariant(label=label, run_dir=relative_run_dir(compare_dir, path))
            for label, path in zip("ABC", dirs, strict=True)
        ),
    )
    dom = parse(write_compare(compare_dir, manifest).read_text(encoding="utf-8"))
    pairs = {row.attrs["data-pair"] for row in dom.find_all("tr", cls="paired-row")}
    assert pairs == {"B|A", "C|A"}
    assert len(dom.find_all("img", cls="diff-heatmap")) == 2
    assert (compare_dir / "diff-needle-2.png").is_file()


def test_one_panel_per_suite_with_its_own_paired_test(tmp_path: Path) -> None:
    a, b = paired_results([("miss", "pass", 1000)] * 4 + [("pass", "pass", 2000)] * 2)
    a += [result(f"k{i}", "pass", 1000, suite="config") for i in range(3)]
    b += [result(f"k{i}", "miss" if i else "pass", 1000, suite="config") for i in range(3)]
    dirs = [
        store_run(tmp_path, run_of(label, (1000, 2000), (0.0, 50.0, 100.0), run_id=f"r-{label}"), results)
        for label, results in (("A", a), ("B", b))
    ]
    compare_dir = tmp_path / "compare-suites"
    manifest = CompareManifest(
        compare_id="suites",
        created_at=1_700_000_000.0,
        variants=tuple(
            CompareVariant(label=label, run_dir=relative_run_dir(compare_dir, path))
            for label, path in zip("AB", dirs, strict=True)
        ),
    )
    dom = parse(write_compare(compare_dir, manifest).read_text(encoding="utf-8"))
    assert [s.attrs["data-suite"] for s in dom.find_all("section", cls="suite-compare")] == [
        "needle",
        "config",
    ]
    config = dom.by_id("suite-config")
    rows = {r.attrs["data-variant"]: r.attrs for r in config.find_all("tr", cls="suite-variant")}
    assert (rows["A"]["data-passes"], rows["B"]["data-passes"], rows["B"]["data-answered"]) == ("3", "1", "3")
    scopes = {r.attrs["data-scope"]: r.attrs for r in dom.find_all("tr", cls="paired-row")}
    assert (scopes["suite:config"]["data-gained"], scopes["suite:config"]["data-lost"]) == ("0", "2")
    assert (scopes["suite:needle"]["data-gained"], scopes["suite:needle"]["data-lost"]) == ("4", "0")
    assert len(dom.find_all("img", cls="diff-heatmap")) == 2


def test_interleaved_runs_get_the_paired_sign_test(tmp_path: Path) -> None:
    compare_dir = build_compare(tmp_path)
    manifest = read_manifest(compare_dir).model_copy(update={"interleaved": True})
    write_compare(compare_dir, manifest)
    dom = parse((compare_dir / "compare.html").read_text(encoding="utf-8"))
    assert dom.by_id("throughput-order").attrs["data-interleaved"] == "true"
    decode = dom.by_id("throughput-compare").find_all("tr", data_metric="decode_tps")[0]
    sign = decode.find_all("td", cls="sign-test")[0].attrs
    assert (sign["data-better"], sign["data-worse"]) == ("24", "0")  # the OOM case was timed under B only
    assert float(sign["data-p"]) == pytest.approx(binomtest(0, 24, 0.5).pvalue)
    stored = json.loads((compare_dir / COMPARE_FILE).read_text())
    assert stored["interleaved"] is True and stored["numbers"]["pairs"][0]["interleaved"] is True
    assert stored["numbers"]["pairs"][0]["speed_changes"]["decode_tps"]["p_value"] == pytest.approx(
        binomtest(0, 24, 0.5).pvalue
    )
