"""The model card's paired tests: long_recall cells against a reference cell (or faulty against
correct), and two sweep runs case by case, with the exact McNemar p of recall_eval.stats."""

from __future__ import annotations

import json
from pathlib import Path

from launchers.reference.training.paired import pair_cells, pair_runs


def _row(case: str, dtype: str, topk: int, passed: bool, length: int = 8192) -> dict:
    return {
        "case_id": case,
        "suite": "needle",
        "target_tokens": length,
        "dtype": dtype,
        "index_topk": topk,
        "pass": passed,
    }


def test_cells_pair_case_by_case_against_the_reference_cell(tmp_path: Path) -> None:
    rows = [_row(f"c{i}", "bf16", 2048, True) for i in range(8)]
    rows += [_row(f"c{i}", "fp4", 64, i >= 7) for i in range(8)]  # 7 lost, none gained
    path = tmp_path / "long.json"
    path.write_text(json.dumps({"rows": rows}))
    lines = {x["group"]: x for x in pair_cells(path, "bf16/2048", None)}
    assert lines["fp4/64@8192"] == lines["fp4/64@all"] | {"group": "fp4/64@8192"}
    fp4 = lines["fp4/64@all"]
    assert (fp4["pass_a"], fp4["pass_b"], fp4["only_a"], fp4["only_b"]) == (8, 1, 7, 0)
    assert fp4["p"] == round(2 * 0.5**7, 4)
    assert lines["bf16/2048@all"]["p"] == 1.0


def test_faulty_file_is_paired_with_the_same_cell_of_the_correct_one(tmp_path: Path) -> None:
    good, bad = tmp_path / "good.json", tmp_path / "bad.json"
    good.write_text(json.dumps({"rows": [_row(f"c{i}", "fp8", 64, True) for i in range(4)]}))
    bad.write_text(json.dumps({"rows": [_row(f"c{i}", "fp8", 64, i != 0) for i in range(4)]}))
    (line, _) = pair_cells(good, "bf16/2048", bad)
    assert (line["only_a"], line["only_b"], line["p"]) == (1, 0, 1.0)


def test_two_sweep_runs_pair_by_case_id_per_suite(tmp_path: Path) -> None:
    for name, outcomes in (("a", ["pass", "pass", "miss"]), ("b", ["miss", "pass", "pass"])):
        run = tmp_path / name / "20261207-000000-abcdef"
        run.mkdir(parents=True)
        rows = [{"case_id": f"c{i}", "suite": "config", "outcome": o} for i, o in enumerate(outcomes)]
        (run / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    config, pooled = pair_runs(tmp_path / "a", tmp_path / "b")
    assert config["group"] == "config" and pooled["group"] == "pooled"
    assert (config["pass_a"], config["pass_b"], config["only_a"], config["only_b"], config["p"]) == (
        2,
        2,
        1,
        1,
        1.0,
    )
