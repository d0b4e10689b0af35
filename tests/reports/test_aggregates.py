"""reports.aggregates on hand-built results: cells, summaries, per-length throughput, failures."""

from __future__ import annotations

import pytest

from recall_eval.stats import wilson_interval
from recall_eval.types import Completion, Outcome, Result
from reports import aggregates


def make(
    outcome: Outcome,
    length: int = 1000,
    depth: float = 50.0,
    trial: int = 0,
    suite: str = "needle",
    completion: Completion | None = None,
    case_id: str | None = None,
    prompt_tokens: int | None = None,
) -> Result:
    return Result(
        case_id=case_id or f"{suite}-{length}-{depth:g}-{trial}",
        suite=suite,
        variant="default",
        outcome=outcome,
        target_tokens=length,
        depth_percent=depth,
        trial=trial,
        prompt_tokens=prompt_tokens,
        completion=completion,
        started_at=0.0,
        finished_at=1.0,
    )


def timed(
    ttft: float, prompt: int | None = None, tokens: int | None = None, gaps: tuple[float, ...] = ()
) -> Completion:
    return Completion(text="x", prompt_tokens=prompt, completion_tokens=tokens, ttft_s=ttft, itl_s=gaps)


def test_summary_leaves_infrastructure_out_of_recall() -> None:
    results = [
        make("pass", 338, 0, 0),
        make("pass", 338, 0, 1),
        make("pass", 1000, 0, 0),
        make("miss", 1000, 0, 1),
        make("oom", 1000, 50, 0),
        make("too_long", 4000, 0, 0),
        make("truncated", 2000, 0, 0),
    ]
    summary = aggregates.summarize(results)
    assert (summary.cases, summary.passes, summary.answered, summary.infra) == (7, 3, 5, 2)
    assert summary.recall == pytest.approx(3 / 5)
    assert (summary.ci_low, summary.ci_high) == wilson_interval(3, 5)
    assert (
        summary.outcomes["oom"] == 1 and summary.outcomes["too_long"] == 1 and summary.outcomes["crash"] == 0
    )
    assert set(summary.outcomes) == set(aggregates.ALL_OUTCOMES)
    # 338: 1.0, 1000: 0.5 -> the effective length is 338; 4000 has no answered case at all
    assert summary.effective_length == 338
    assert aggregates.recall_by_length(results) == {338: 1.0, 1000: 0.5, 2000: 0.0, 4000: None}


def test_summary_of_only_infrastructure_has_no_recall() -> None:
    summary = aggregates.summarize([make("crash"), make("timeout", trial=1)])
    assert summary.recall is None
    assert (summary.ci_low, summary.ci_high) == (None, None)  # nothing answered: no interval
    assert summary.effective_length is None


def test_suite_grid_cells_and_planned_gaps() -> None:
    results = [
        make("pass", 1000, 0, 0),
        make("miss", 1000, 0, 1),
        make("oom", 1000, 50, 0),
        make("oom", 1000, 50, 1),
        make("crash", 1000, 50, 2),
        make("pass", 2000, 50, 0),
        make("timeout", 2000, 50, 1),
        make("pass", 2000, 0, 0, suite="other"),
    ]
    grid = aggregates.suite_grid(results, "needle", lengths=(1000, 2000, 4000), depths=(0.0, 50.0, 100.0))
    assert grid.lengths == (1000, 2000, 4000)
    assert grid.depths == (0.0, 50.0, 100.0)
    mixed, infra_only = grid.cells[0][0], grid.cells[1][0]
    assert mixed is not None and (mixed.passes, mixed.answered, mixed.infra, mixed.recall) == (1, 2, 0, 0.5)
    assert infra_only is not None and infra_only.recall is None and infra_only.answered == 0
    assert infra_only.infra_outcomes == ("oom", "crash")  # most frequent first
    partial = grid.cells[1][1]
    assert partial is not None and (partial.passes, partial.answered, partial.infra) == (1, 1, 1)
    assert grid.cells[0][1] is None  # needle 2000/0 only exists in the other suite
    assert all(cell is None for cell in grid.cells[2])  # depth 100 planned, never run
    assert all(row[2] is None for row in grid.cells)  # length 4000 planned, never run


def test_suite_grid_adds_stored_points_outside_the_plan() -> None:
    grid = aggregates.suite_grid([make("pass", 3000, 33.0)], "needle", lengths=(1000,), depths=(0.0,))
    assert grid.lengths == (1000, 3000) and grid.depths == (0.0, 33.0)


def test_length_frames_throughput() -> None:
    results = [
        # prefill: usage prompt tokens preferred over the calibrated count
        make("pass", 1000, 0, 0, completion=timed(0.5, prompt=1010, tokens=5, gaps=(0.1, 0.1, 0.1, 0.1))),
        make(
            "miss",
            1000,
            50,
            0,
            completion=timed(0.25, prompt=None, tokens=3, gaps=(0.05, 0.05)),
            prompt_tokens=1000,
        ),
        make("pass", 1000, 100, 0, completion=timed(1.0, prompt=1000, tokens=1)),
        make("oom", 1000, 100, 1),
        make("pass", 2000, 0, 0, completion=timed(2.0, prompt=2000, tokens=11, gaps=(0.1,) * 10)),
    ]
    first, second = aggregates.length_frames(results)
    assert (first.target_tokens, first.cases, first.passes, first.answered, first.timed) == (1000, 4, 2, 3, 3)
    assert first.ttft_p50_s == pytest.approx(0.5)
    assert first.ttft_p95_s == pytest.approx(0.5 + 0.9 * 0.5)  # linear between 0.5 and 1.0
    assert first.prefill_tps_p50 == pytest.approx(2020.0)  # median of 2020, 4000, 1000
    assert first.decode_tps_p50 == pytest.approx(15.0)  # 4/0.4 = 10 and 2/0.1 = 20; 1 token has no rate
    assert first.prompt_tokens_p50 == pytest.approx(1000.0)  # 1010, 1000, 1000 (oom has none)
    assert second.decode_tps_p50 == pytest.approx(10.0)
    assert second.recall == 1.0


def test_length_frame_without_completions() -> None:
    (only,) = aggregates.length_frames([make("too_long", 9000)])
    assert only.timed == 0 and only.ttft_p50_s is None and only.decode_tps_p50 is None and only.recall is None


def test_latest_per_case_keeps_the_last_and_orders_by_grid() -> None:
    first = make("oom", 2000, 0, 0, case_id="a")
    again = make("pass", 2000, 0, 0, case_id="a")
    other = make("miss", 1000, 50, 0, case_id="b")
    assert aggregates.latest_per_case([first, other, again]) == [other, again]


def test_failures_in_grid_order_without_passes() -> None:
    results = [
        make("oom", 2000, 0),
        make("pass", 1000, 0),
        make("miss", 1000, 50, 1),
        make("miss", 1000, 50, 0),
    ]
    got = [
        (r["target_tokens"], r["depth_percent"], r["trial"], r["outcome"])
        for r in aggregates.failures(results)
    ]
    assert got == [(1000, 50.0, 0, "miss"), (1000, 50.0, 1, "miss"), (2000, 0.0, 0, "oom")]


def test_suites_and_tokenizers() -> None:
    results = [make("pass", suite="multiturn"), make("pass", suite="needle", case_id="n")]
    assert aggregates.suites_in(results, planned=("needle", "config")) == ("needle", "config", "multiturn")
    with_tok = [r.model_copy(update={"tokenizer": "server:/v1/tokenize"}) for r in results] + [make("miss")]
    assert aggregates.tokenizers_used(with_tok) == {"server:/v1/tokenize": 2, "unknown": 1}


def test_not_applicable_is_neither_recall_nor_infrastructure_nor_a_failure() -> None:
    results = [
        make("not_applicable", 338, 0, 0, suite="config"),
        make("not_applicable", 338, 0, 1, suite="config"),
        make("pass", 1000, 0, 0, suite="config"),
        make("miss", 1000, 0, 1, suite="config"),
        make("pass", 2000, 0, 0, suite="config"),
    ]
    summary = aggregates.summarize(results)
    assert (summary.cases, summary.answered, summary.infra, summary.not_applicable) == (5, 3, 0, 2)
    assert summary.recall == pytest.approx(2 / 3)
    # 338 measured nothing, so it neither holds nor breaks the effective length
    assert aggregates.recall_by_length(results) == {1000: 0.5, 2000: 1.0}
    assert [r["outcome"] for r in aggregates.failures(results)] == ["miss"]
    cell = aggregates.suite_grid(results, "config").cells[0][0]
    assert (cell.answered, cell.infra, cell.not_applicable, cell.recall) == (0, 0, 2, None)
