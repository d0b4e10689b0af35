"""`recall-eval compare fp8 bf16` and `recall-eval compare topk=128 topk=512` on the real reference engine.

Each compare launches the reference engine twice, one after the other, on a small grid. The checks are
about completeness and structure (every case once under each variant, identical case ids, the variant's
settings reached the server, the report opens in Chromium, a rerun reuses both runs), never about recall
values: the reference engine's answers depend on its training.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from launchers.ports import busy_ports
from tests.e2e.test_compare_base_url import recall_eval, run_dirs, snapshot
from tests.reports.test_compare_browser import check_compare_page, open_in_chromium

pytestmark = [pytest.mark.slow]

GRID = ["--lengths", "338,700", "--depths", "50", "--trials", "2", "--max-tokens", "4"]
CASES = 2 * 1 * 2


def compare_ok(*variants: str) -> tuple[Path, dict, list[Path]]:
    done = recall_eval("compare", *variants, *GRID, timeout=420)
    assert done.returncode == 0, done.stderr[-3000:]
    html = Path(done.stdout.strip().splitlines()[-1])
    compare = json.loads((html.parent / "compare.json").read_text())
    assert [v["label"] for v in compare["variants"]] == list(variants)
    dirs = [(html.parent / v["run_dir"]).resolve() for v in compare["variants"]]
    for run_dir in dirs:
        run = json.loads((run_dir / "run.json").read_text())
        assert run["status"] == "finished", run.get("note")
        assert (run_dir / "report.html").is_file()
    # Every case exactly once under each variant, and the same cases under both.
    ids = []
    for run_dir in dirs:
        lines = (run_dir / "results.jsonl").read_text().splitlines()
        case_ids = [json.loads(line)["case_id"] for line in lines]
        assert len(case_ids) == len(set(case_ids)) == CASES
        ids.append(set(case_ids))
    assert ids[0] == ids[1]
    overall = compare["numbers"]["pairs"][0]["overall"]
    assert overall["paired"] + overall["excluded_infra"] == CASES and overall["unpaired"] == 0
    assert 0.0 <= overall["p_value"] <= 1.0
    assert compare["verdict"].strip()
    return html, compare, dirs


def run_json(run_dir: Path) -> dict:
    return json.loads((run_dir / "run.json").read_text())


@pytest.mark.browser
def test_compare_fp8_bf16_report_opens_and_rerun_reuses(tmp_path: Path) -> None:
    html, compare, dirs = compare_ok("fp8", "bf16")
    fp8, bf16 = (run_json(d) for d in dirs)
    assert (fp8["profile"]["index_k_dtype"], bf16["profile"]["index_k_dtype"]) == ("fp8", "bf16")
    assert (fp8["server_info"]["index_k_dtype"], bf16["server_info"]["index_k_dtype"]) == ("fp8", "bf16")
    # One after the other: the fp8 run (and its server) ended before the bf16 run began; neither server
    # is left listening once the compare has returned.
    assert fp8["finished_at"] <= bf16["created_at"]
    # ... so the compare says sequential: no paired speed test on runs made one after the other.
    assert compare["interleaved"] is False and not fp8["interleaved"] and not bf16["interleaved"]
    assert (
        "sequential runs, " in compare["verdict"]
        and "not a controlled speed comparison" in compare["verdict"]
    )
    assert "sign test" not in compare["verdict"]
    assert not busy_ports("127.0.0.1", [fp8["server_info"]["port"], bf16["server_info"]["port"]])
    a, b = compare["numbers"]["variants"]
    # The memory plan comes from each launched server: bf16 index keys take more bytes per token.
    assert (
        a["kv_bytes_per_token"]
        and b["kv_bytes_per_token"]
        and b["kv_bytes_per_token"] > a["kv_bytes_per_token"]
    )
    assert a["time_to_ready_s"] > 0 and b["time_to_ready_s"] > 0
    dom, images = open_in_chromium(html, tmp_path)
    check_compare_page(dom, images, ["fp8", "bf16"], ["needle"])

    before = snapshot(run_dirs())
    done = recall_eval("compare", "fp8", "bf16", *GRID, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    assert Path(done.stdout.strip().splitlines()[-1]) == html
    for label, run_dir in zip(("fp8", "bf16"), dirs, strict=True):
        assert f"{label}: reusing run {run_dir.name}" in done.stderr
    assert "starting" not in done.stderr  # no server was launched
    assert snapshot(run_dirs()) == before
    again = json.loads((html.parent / "compare.json").read_text())
    assert again["rendered_at"] > compare["rendered_at"] and again["numbers"] == compare["numbers"]
    # both runs reused: the verdict says how old each is, the console gives the paired result
    assert (
        "fp8: run reused, finished " in again["verdict"] and "bf16: run reused, finished " in again["verdict"]
    )
    assert "bf16 vs fp8: " in done.stderr and "exact McNemar p = " in done.stderr


def test_compare_topk_128_vs_512() -> None:
    _, compare, dirs = compare_ok("topk=128", "topk=512")
    small, large = (run_json(d) for d in dirs)
    assert (small["profile"]["index_topk"], large["profile"]["index_topk"]) == (128, 512)
    # The launched servers report the index_topk they ran with.
    assert (small["server_info"]["index_topk"], large["server_info"]["index_topk"]) == (128, 512)
    assert [v["label"] for v in compare["numbers"]["variants"]] == ["topk=128", "topk=512"]


def test_compare_fp8_fp4_on_the_embedded_default() -> None:
    """`compare fp8 fp4` runs end to end on the embedded default (it used to exit 2): the fp4 server
    stores SGLang's fp4 index-key format, says so in /server_info, and its pool takes fewer bytes per
    token (68 index-key bytes per 4-token block against fp8's 132)."""
    _, compare, dirs = compare_ok("fp8", "fp4")
    fp8, fp4 = (run_json(d) for d in dirs)
    assert (fp8["profile"]["index_k_dtype"], fp4["profile"]["index_k_dtype"]) == ("fp8", "fp4")
    assert (fp8["server_info"]["index_k_dtype"], fp4["server_info"]["index_k_dtype"]) == ("fp8", "fp4")
    a, b = compare["numbers"]["variants"]
    # two DSA layers, one index key per 4 tokens: 2 * (132 - 68) / 4 = 32 bytes per token fewer
    assert 30 <= a["kv_bytes_per_token"] - b["kv_bytes_per_token"] <= 32
