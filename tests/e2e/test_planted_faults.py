"""The gate's own acceptance test: `recall-eval compare reference fault=NAME --fail-on-regression` catches
each planted indexer bug of the reference engine (launchers/reference/faults.py) on a small grid, with
the misses where the bug lives, and every output of a faulty run says it was broken on purpose.

One compare, the baseline run once: needle cases of 3,080 tokens at depths 25, 95 and 97, 4 trials.
At that length the last prompt position has 754 candidate blocks (753 + 8 while 32 answer tokens are
decoded: the page boundary does not move). topk_truncated scores only the first 512 (tokens 0-2,047),
so needles past 2,048 tokens (depths 95 and 97) are lost and depth 25 is not; page_boundary scores
only the 704 blocks of whole 64-key pages (tokens 0-2,815), so the same deep needles, which lie past
token 2,816 and before the local window, are lost. The grid is chosen where the bugs live; the faults
and the model are what they are.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.e2e.test_compare_base_url import recall_eval

pytestmark = [pytest.mark.slow]

GRID = ["--lengths", "3080", "--depths", "25,95,97", "--trials", "4", "--max-tokens", "32"]
FAULTS = ["fault=topk_truncated", "fault=page_boundary"]
DEEP = (95, 97)


def _results(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "results.jsonl").read_text().splitlines()]


def test_compare_catches_each_planted_fault_where_it_lives() -> None:
    done = recall_eval("compare", "reference", *FAULTS, *GRID, "--fail-on-regression", timeout=1800)
    assert done.returncode == 4, done.stderr[-3000:]  # finished; a variant significantly worse
    html = Path(done.stdout.strip().splitlines()[-1])
    compare = json.loads((html.parent / "compare.json").read_text())
    dirs = {v["label"]: (html.parent / v["run_dir"]).resolve() for v in compare["variants"]}
    baseline = {r["case_id"]: r for r in _results(dirs["reference"])}
    assert sum(r["outcome"] == "pass" for r in baseline.values()) >= 11, "the fault-free engine must answer"
    for pair in compare["numbers"]["pairs"]:
        label, overall = pair["b"], pair["overall"]
        assert pair["a"] == "reference" and label in FAULTS
        assert overall["p_value"] < 0.01 and overall["miss_to_pass"] == 0, (label, overall)
        assert f"variant {label}, needle: recall" in done.stderr and "(--fail-on-regression)" in done.stderr
        # where the misses are: the deep needles, never depth 25
        flipped = [
            r
            for r in _results(dirs[label])
            if r["outcome"] in ("miss", "empty", "truncated") and baseline[r["case_id"]]["outcome"] == "pass"
        ]
        assert len(flipped) >= 8 and {r["depth_percent"] for r in flipped} <= set(DEEP), label
        first_lost = 2048 if label == "fault=topk_truncated" else 2816
        assert all(r["needle_token_offset"] >= first_lost for r in flipped), label
        # marked in every output: run.json (profile, the server's own /server_info and version), the
        # console, the run's report
        run = json.loads((dirs[label] / "run.json").read_text())
        name = label.removeprefix("fault=")
        assert run["profile"]["fault"] == name and run["server_info"]["fault"] == name
        assert f"fault={name}" in json.dumps(run["versions"])
        assert f"planted fault {name} is on" in done.stderr
        assert 'id="fault-banner"' in (dirs[label] / "report.html").read_text()
    assert json.loads((dirs["reference"] / "run.json").read_text())["profile"]["fault"] is None
    assert 'id="fault-banner"' not in (dirs["reference"] / "report.html").read_text()


STALE_GRID = ["--lengths", "8192", "--depths", "25,95,97", "--trials", "4", "--max-tokens", "32"]


def test_compare_catches_stale_index_keys_after_a_prefix_cache_hit() -> None:
    label = "fault=prefix_cache_stale_index"
    done = recall_eval("compare", "reference", label, *STALE_GRID, "--fail-on-regression", timeout=1800)
    assert done.returncode == 4, done.stderr[-3000:]
    html = Path(done.stdout.strip().splitlines()[-1])
    compare = json.loads((html.parent / "compare.json").read_text())
    dirs = {v["label"]: (html.parent / v["run_dir"]).resolve() for v in compare["variants"]}
    baseline = {r["case_id"]: r for r in _results(dirs["reference"])}
    assert all(r["outcome"] == "pass" for r in baseline.values()), "the fault-free engine must answer"
    (pair,) = compare["numbers"]["pairs"]
    assert pair["overall"]["p_value"] < 0.01 and pair["overall"]["miss_to_pass"] == 0, pair
    faulty = _results(dirs[label])
    flipped = [r for r in faulty if r["outcome"] != "pass"]
    assert len(flipped) >= 8 and {r["depth_percent"] for r in flipped} <= set(DEEP)
    # where: the first case of each trial's haystack had no cache hit and passes; every miss came later
    for trial in {r["trial"] for r in faulty}:
        first = min((r for r in faulty if r["trial"] == trial), key=lambda r: r["started_at"])
        assert first["depth_percent"] == 25 and first["outcome"] == "pass", first
    run = json.loads((dirs[label] / "run.json").read_text())
    assert run["server_info"]["fault"] == "prefix_cache_stale_index"
    assert run["server_info"]["disable_radix_cache"] is False
    assert 'id="fault-banner"' in (dirs[label] / "report.html").read_text()


# fp4 keys and index_topk 64: a profile setting a user can choose (the fault and the model untouched).
# At the default index_topk (512) the needle's block stays selected under a misread scale (model card:
# scale probe), at 64 it drops out for some of the answer's decoding steps.
SCALE_GRID = ["--lengths", "8192", "--depths", "0..100:5", "--trials", "8", "--max-tokens", "32"]


def test_compare_catches_fp4_scales_read_from_the_next_index_page_at_topk_64() -> None:
    base, label = "fp4,topk=64", "fp4,topk=64,fault=scale_page"
    done = recall_eval("compare", base, label, *SCALE_GRID, "--fail-on-regression", timeout=1800)
    assert done.returncode == 4, done.stderr[-3000:]
    html = Path(done.stdout.strip().splitlines()[-1])
    compare = json.loads((html.parent / "compare.json").read_text())
    dirs = {v["label"]: (html.parent / v["run_dir"]).resolve() for v in compare["variants"]}
    baseline = {r["case_id"]: r for r in _results(dirs[base])}
    assert sum(r["outcome"] == "pass" for r in baseline.values()) >= 38, "the fault-free engine must answer"
    (pair,) = compare["numbers"]["pairs"]
    assert pair["overall"]["p_value"] < 0.01 and pair["overall"]["miss_to_pass"] == 0, pair
    flipped = [
        r
        for r in _results(dirs[label])
        if r["outcome"] != "pass" and baseline[r["case_id"]]["outcome"] == "pass"
    ]
    assert len(flipped) >= 8
    # where: needles the indexer scores; a depth-100 needle lies in the local window (attended whatever
    # the index keys say), so the misread scales never reach it
    assert 100.0 not in {r["depth_percent"] for r in flipped}
    assert all(r["prompt_tokens"] - r["needle_token_offset"] > 64 for r in flipped)
    run = json.loads((dirs[label] / "run.json").read_text())
    assert run["server_info"]["fault"] == "scale_page" and run["profile"]["index_k_dtype"] == "fp4"
