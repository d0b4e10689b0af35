"""--capture-indexer end to end against the real reference server (separate processes).

Whatever the bundled weights are (trained or random), the engine's selections are real top-k over
compressed blocks, so the tests assert coverage logic and report structure, never recall:
- with index_topk above the number of candidate blocks every block is selected, so a needle outside
  the local window is reported as selected in every DSA layer at every answer position;
- with fp8 index keys and index_topk 4 at long lengths, every miss gets a cause that follows the rule,
  and the run report and the compare report show the split.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path

import httpx
import numpy as np
import pytest

from recall_eval.indexer_coverage import SELECTED_SHARE
from recall_eval.store import load_run
from recall_eval.types import Result
from tests.e2e.cli import run_cli
from tests.e2e.reference_server import ReferenceServer, free_port
from tests.reports.dom import parse

pytestmark = pytest.mark.slow
CONTEXT = "4096"
WINDOW, BLOCK = 64, 4  # the bundled model's DSA local window and block size (its /server_info says so)


@pytest.fixture(scope="module")
def wide(tmp_path_factory):
    log = tmp_path_factory.mktemp("wide") / "server.log"
    server = ReferenceServer(
        log, "--context-length", CONTEXT, "--enable-return-indexer-topk", "--index-k-dtype", "fp8"
    )
    yield server
    server.stop()


@pytest.fixture(scope="module")
def narrow(tmp_path_factory):
    log = tmp_path_factory.mktemp("narrow") / "server.log"
    server = ReferenceServer(
        log, "--context-length", CONTEXT, "--enable-return-indexer-topk", "--index-k-dtype", "fp8",
        "--json-model-override-args", '{"index_topk": 4}',
    )  # fmt: skip
    yield server
    server.stop()


def _window_start(position: int) -> int:
    return BLOCK * (max(0, position - WINDOW + 1) // BLOCK)


def _answered(results: list[Result]) -> list[Result]:
    return [r for r in results if r.outcome in ("pass", "miss", "empty", "truncated")]


def test_server_selects_every_candidate_block_when_topk_exceeds_them(wide):
    info = httpx.get(f"{wide.base_url}/server_info", timeout=10).json()
    assert (info["indexer_block_size"], info["indexer_local_window"]) == (BLOCK, WINDOW)
    text = " ".join(f"word{i}" for i in range(300))
    ids = httpx.post(f"{wide.base_url}/v1/tokenize", json={"prompt": text}, timeout=30).json()["tokens"]
    body = {"input_ids": ids, "sampling_params": {"max_new_tokens": 2}, "return_indexer_topk": True}
    meta = httpx.post(f"{wide.base_url}/generate", json=body, timeout=120).json()["meta_info"]
    rows = np.frombuffer(base64.b64decode(meta["indexer_topk"]), dtype=np.int32)
    rows = rows.reshape(len(ids) + 2 - 1, info["num_indexer_layers"], info["index_topk"])
    candidates = set(range(_window_start(len(ids) - 1) // BLOCK))
    assert len(candidates) > 10
    for layer in rows[len(ids) - 1]:
        assert {int(v) for v in layer if v >= 0} == candidates


def test_compare_with_capture_known_selected_and_side_by_side(wide, narrow, tmp_path):
    completed = run_cli(
        "compare", "topk512", "topk4", "--base-url", wide.base_url, "--base-url", narrow.base_url,
        "--capture-indexer", "--lengths", "400,1200", "--depths", "0,50", "--trials", "1", "--max-tokens", "6",
        timeout=600,
    )  # fmt: skip
    assert completed.returncode == 0, completed.stderr
    html = Path(completed.stdout.strip().splitlines()[-1])
    compare = json.loads((html.parent / "compare.json").read_text())
    run_dirs = {v["label"]: (html.parent / v["run_dir"]).resolve() for v in compare["variants"]}

    run, results = load_run(run_dirs["topk512"])
    assert run.spec.capture_indexer and run.server_info["indexer_layout"]["kind"] == "block"
    assert len(_answered(results)) == 4
    for result in _answered(results):
        last = result.prompt_tokens - 1
        assert result.params["needle_token_end"] <= _window_start(last), "the needle must need selection"
        assert result.coverage is not None
        assert result.coverage.layers == (1.0, 1.0)  # selected in every DSA layer, at every answer position
        assert result.coverage.last_prompt_token == (True, True)
        assert result.coverage.cause == (None if result.outcome == "pass" else "generation")

    dom = parse(html.read_text(encoding="utf-8"))
    panels = dom.by_id("coverage-section").find_all("div", cls="coverage-variant")
    assert [p.attrs["data-label"] for p in panels] == ["topk512", "topk4"]
    for index, panel in enumerate(panels, start=1):
        assert panel.by_id(f"coverage-{index}").attrs["data-layers"] == "2"
        assert panel.by_id(f"coverage-{index}-heatmap").attrs["src"].startswith("data:image/png")
    for entry in compare["numbers"]["variants"]:
        rows = entry["indexer_coverage"]["by_length"]
        assert all(row["selection"] + row["generation"] == row["with_coverage"] for row in rows)


def test_launched_fp8_small_topk_classifies_misses_and_reports_the_split(tmp_path):
    completed = run_cli(
        "sweep", "--profile", "reference", "--index-k-dtype", "fp8", "--index-topk", "4", "--capture-indexer",
        "--context-length", CONTEXT, "--port", str(free_port()), "--lengths", "1500,3000", "--depths", "0,50",
        "--trials", "1", "--max-tokens", "6", "--out", str(tmp_path), timeout=600,
    )  # fmt: skip
    assert completed.returncode == 0, completed.stderr
    report = Path(completed.stdout.strip().splitlines()[-1])
    run, results = load_run(report.parent)
    assert run.profile.enable_return_indexer_topk  # the launcher was asked for the flag ...
    assert run.server_info["enable_return_indexer_topk"] is True  # ... and the server got it
    assert run.server_info["indexer_layout"]["index_topk"] == 4
    answered = _answered(results)
    assert len(answered) == 4
    for result in answered:
        coverage = result.coverage
        assert coverage is not None and len(coverage.layers) == 2
        assert all(0.0 <= share <= 1.0 for share in coverage.layers)
        if result.outcome == "pass":
            assert coverage.cause is None
            continue
        selected = sum(share >= SELECTED_SHARE for share in coverage.layers)
        assert coverage.cause == ("generation" if selected == 2 else "selection")

    dom = parse(report.read_text(encoding="utf-8"))
    section = dom.by_id("coverage-section")
    misses = [r for r in answered if r.outcome != "pass"]
    rows = {int(r.attrs["data-length"]): r.attrs for r in section.find_all("tr", cls="cause-row")}
    assert set(rows) == {r.target_tokens for r in misses}
    for length, attrs in rows.items():
        here = [r for r in misses if r.target_tokens == length]
        assert int(attrs["data-misses"]) == len(here)
        assert int(attrs["data-selection"]) == sum(r.coverage.cause == "selection" for r in here)
        assert int(attrs["data-generation"]) == sum(r.coverage.cause == "generation" for r in here)
    assert section.by_id("coverage-heatmap").attrs["src"].startswith("data:image/png;base64,")
