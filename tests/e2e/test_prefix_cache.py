"""The reference engine's prefix cache through the real CLI and server: the same answers as the same
engine without it (reference-no-prefix-cache: --disable-radix-cache), with prompts that hit it.

Needle cases of 8,192 tokens at depths 25, 95 and 97, 4 trials: within a trial the haystack is shared
up to the first needle, so 8 of the 12 prompts reuse 25% to 95% of a finished prompt's pages.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.e2e.test_compare_base_url import recall_eval

pytestmark = [pytest.mark.slow]

GRID = ["--lengths", "8192", "--depths", "25,95,97", "--trials", "4", "--max-tokens", "32"]


def _results(run_dir: Path) -> dict[str, dict]:
    rows = [json.loads(line) for line in (run_dir / "results.jsonl").read_text().splitlines()]
    return {r["case_id"]: r for r in rows}


def test_answers_are_the_same_with_and_without_the_prefix_cache() -> None:
    done = recall_eval("compare", "reference", "reference-no-prefix-cache", *GRID, timeout=1800)
    assert done.returncode == 0, done.stderr[-3000:]
    html = Path(done.stdout.strip().splitlines()[-1])
    compare = json.loads((html.parent / "compare.json").read_text())
    dirs = {v["label"]: (html.parent / v["run_dir"]).resolve() for v in compare["variants"]}
    cached, plain = _results(dirs["reference"]), _results(dirs["reference-no-prefix-cache"])
    assert cached.keys() == plain.keys() and len(cached) == 12
    for case_id, row in cached.items():
        assert row["completion"]["text"] == plain[case_id]["completion"]["text"], case_id
    assert sum(r["outcome"] == "pass" for r in cached.values()) >= 11
    infos = {label: json.loads((d / "run.json").read_text())["server_info"] for label, d in dirs.items()}
    assert infos["reference"]["disable_radix_cache"] is False
    assert infos["reference-no-prefix-cache"]["disable_radix_cache"] is True
