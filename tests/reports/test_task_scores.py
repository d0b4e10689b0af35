"""The RULER-style task table: mean scores per task and length, effective length at RULER's 85.6 and at
this project's 90, the average row and MRCR floors, against values computed by hand."""

from __future__ import annotations

import pytest

from recall_eval.compare_store import CompareManifest, CompareVariant, relative_run_dir
from recall_eval.frame import frame_of
from recall_eval.types import Completion, Result
from reports.aggregates import length_frames, suite_grid
from reports.compare_report import write_compare
from reports.heatmap import cell_text
from reports.task_scores import RULER_THRESHOLD, score_summary, task_table
from tests.reports.compare_builders import run_of, store_run


def _result(
    task: str, length: int, trial: int, score: float | None, outcome: str = "miss", **params
) -> Result:
    return Result(
        case_id=f"{task}-{length}-{trial}", suite=task, variant="default", outcome=outcome,
        target_tokens=length, depth_percent=50.0, trial=trial, started_at=0.0, finished_at=1.0,
        completion=Completion(text="x") if outcome != "oom" else None, score=score,
        params={"task": task, "metric": "mrcr" if task.startswith("mrcr") else "string_match_all", **params},
    )  # fmt: skip


def test_scores_effective_lengths_and_floors_by_hand():
    results = [
        # vt: 4K mean (1 + 0.8)/2 = 0.9, 8K mean (0.9 + 0.8)/2 = 0.85, 16K 1.0 -> RULER (0.856): 4K, ours (0.9): 4K
        _result("vt", 4096, 0, 1.0, "pass"), _result("vt", 4096, 1, 0.8),
        _result("vt", 8192, 0, 0.9), _result("vt", 8192, 1, 0.8),
        _result("vt", 16384, 0, 1.0, "pass"),
        # an OOM has no score and stays out of the mean
        _result("vt", 16384, 1, None, "oom"),
        # cwe: 0.86 at 4K (RULER holds, ours does not), 0.95 at 8K
        _result("cwe", 4096, 0, 0.86), _result("cwe", 8192, 0, 0.95),
        _result("mrcr_2", 4096, 0, 0.5, floor=0.3), _result("mrcr_2", 4096, 1, 0.7, floor=0.2),
    ]  # fmt: skip
    table = task_table(frame_of([(None, results)]), planned=("cwe", "vt"))
    assert table is not None and table.lengths == (4096, 8192, 16384)
    assert [row.task for row in table.rows] == ["cwe", "vt", "mrcr_2"]  # planned order first
    cwe, vt, mrcr = table.rows
    assert vt.scores == pytest.approx({4096: 0.9, 8192: 0.85, 16384: 1.0})
    assert vt.mean == pytest.approx((1 + 0.8 + 0.9 + 0.8 + 1.0) / 5) and vt.answered == 5
    assert (vt.ruler_effective_length, vt.effective_length) == (4096, 4096)
    assert (cwe.ruler_effective_length, cwe.effective_length) == (8192, None)
    assert mrcr.floor == pytest.approx(0.25) and vt.floor is None and mrcr.metric == "mrcr"
    assert table.averages() == pytest.approx(
        {4096: (0.86 + 0.9 + 0.6) / 3, 8192: (0.95 + 0.85) / 2, 16384: 1.0}
    )
    assert table.ruler_threshold == RULER_THRESHOLD == 0.856


def test_no_scored_suite_no_table():
    plain = Result(
        case_id="a", suite="needle", variant="default", outcome="pass", target_tokens=1000,
        depth_percent=0.0, started_at=0.0, finished_at=1.0, completion=Completion(text="x"),
    )  # fmt: skip
    assert task_table(frame_of([(None, [plain])])) is None


def test_compare_shows_each_variants_task_table(tmp_path):
    compare_dir = tmp_path / "compare-scored"
    variants = []
    for label, score in (("fp8", 0.5), ("bf16", 1.0)):
        results = [
            _result("vt", 4096, 0, score, "pass" if score == 1 else "miss").model_copy(
                update={"variant": label}
            )
        ]
        run_dir = store_run(tmp_path, run_of(label, (4096,), (50.0,), run_id=f"run-{label}"), results)
        variants.append(CompareVariant(label=label, run_dir=relative_run_dir(compare_dir, run_dir)))
    manifest = CompareManifest(
        compare_id="scored", created_at=0.0, command="recall-eval compare fp8 bf16", variants=tuple(variants)
    )
    html = write_compare(compare_dir, manifest).read_text(encoding="utf-8")
    assert 'id="task-table-0"' in html and 'id="task-table-1"' in html
    assert 'data-score="0.5"' in html and 'data-score="1.0"' in html


def test_a_scored_cell_reads_its_mean_score_and_a_pass_miss_cell_its_passes():
    frame = frame_of([(None, [_result("vt", 4096, 0, 1.0, "pass"), _result("vt", 4096, 1, 0.2)])])
    (row,) = suite_grid(frame, "vt").cells
    (cell,) = row
    assert cell.score == pytest.approx(0.6) and cell_text(cell) == ("60", "n=2")
    plain = cell.__class__(cell.suite, 4096, 50.0, cell.outcomes, recall=0.5)
    assert cell_text(plain) == ("1/2", "")


def test_a_runs_score_summary_and_its_lengths_recall_leave_pass_miss_and_scored_apart():
    needle = Result(
        case_id="needle-4096", suite="needle", variant="default", outcome="miss", target_tokens=4096,
        depth_percent=50.0, started_at=0.0, finished_at=1.0, completion=Completion(text="x"),
    )  # fmt: skip
    results = [
        # task averages: 4K (1.0 + 0.9)/2 = 0.95 holds 85.6, 8K (0.9 + 0.8)/2 = 0.85 does not -> 4K
        _result("vt", 4096, 0, 1.0, "pass"), _result("cwe", 4096, 0, 0.9),
        _result("vt", 8192, 0, 0.9), _result("cwe", 8192, 0, 0.8),
        needle,
    ]  # fmt: skip
    frame = frame_of([(None, results)])
    summary = score_summary(frame)
    assert summary is not None and summary.answered == 4
    assert summary.score == pytest.approx((1.0 + 0.9 + 0.9 + 0.8) / 4)
    assert summary.by_length == pytest.approx({4096: 0.95, 8192: 0.85})
    assert summary.ruler_effective_length == 4096
    # recall per length: the needle's one miss at 4K; the vt pass (score 1) is not a pass; 8K has no recall
    lengths = {row.target_tokens: row for row in length_frames(frame)}
    assert (lengths[4096].passes, lengths[4096].answered, lengths[4096].recall) == (0, 1, 0.0)
    assert lengths[4096].cases == 3 and (lengths[8192].answered, lengths[8192].recall) == (0, None)
    assert score_summary(frame[frame["metric"].isna()]) is None
