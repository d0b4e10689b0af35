"""`study` with `--lengths search:MIN..MAX:BUDGET` through the library (api.study) on the real reference engine:
each cell's cliff searched with its server launched once, study.json holding each cell's bracket and cost, the
frames returned, the page rendered; run again, every stored batch is replayed and no server starts. Structure
only: the reference engine's recall depends on its training."""

from __future__ import annotations

import json

import pytest

from recall_eval import api

pytestmark = [pytest.mark.slow]


def test_each_cell_gets_its_cliff() -> None:
    grid = {
        "suites": "needle",
        "depths": "50",
        "trials": 1,
        "max_tokens": 24,
        "lengths": "search:128..1024:2",
    }
    record = api.study(["topk=4,64"], baseline="topk=64", **grid)
    study = record.study
    assert study["search"] == "search:128..1024:2"
    for cell in study["cells"]:
        assert cell["status"] == "finished" and cell["plan"]["fits"] is True
        cliff = cell["cliff"]
        search = json.loads((record.path / cell["run_dir"] / "search.json").read_text())
        assert (cliff["held"], cliff["fell"]) == (search["held"], search["fell"])
        assert cliff["cases_spent"] == sum(b["cases"] for b in search["batches"]) <= cliff["grid_cases"]
        assert {b["length"] for b in search["batches"]} <= set(range(128, 1025))
    assert list(record.cells["cell"]) == ["topk=4", "topk=64"]
    assert {"cliff_held", "cliff_fell", "kv_bytes_per_token", "ttft_s", "decode_tps"} <= set(
        record.cells.columns
    )
    assert record.recommendation.startswith(("recommend ", "no cell restores recall at lengths >= "))
    assert record.report.is_file() and (record.path / "pareto.png").is_file()

    def stored() -> dict[str, tuple[list, int]]:
        found = {}
        for cell in study["cells"]:
            search_dir = record.path / cell["run_dir"]
            batches = json.loads((search_dir / "search.json").read_text())["batches"]
            found[cell["label"]] = (
                batches,
                len([p for p in search_dir.iterdir() if (p / "run.json").is_file()]),
            )
        return found

    before = stored()
    again = api.study(["topk=4,64"], baseline="topk=64", **grid)
    assert again.study["cells"] == study["cells"] and again.recommendation == record.recommendation
    assert stored() == before  # every batch replayed from its stored run, none sent again
    loaded = api.load_study(record.path)  # read back: the same figures, the page rendered again
    assert loaded.recommendation == record.recommendation and list(loaded.cells["cell"]) == [
        "topk=4",
        "topk=64",
    ]
