"""Builders for compare tests: Results, Runs and stored run directories made by hand."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from recall_eval.store import RunStore
from recall_eval.types import Completion, Outcome, Profile, Result, Run, RunSpec
from reports.compare_frames import VariantRun

LIVE: tuple[Outcome, ...] = ("pass", "miss", "empty", "truncated")


def result(
    case_id: str,
    outcome: Outcome,
    length: int,
    depth: float = 50.0,
    suite: str = "needle",
    *,
    ttft_s: float = 0.5,
    itl_s: float = 0.02,
    completion_tokens: int = 9,
    variant: str = "v",
    answer: str = "",
    started_at: float = 1_700_000_000.0,
) -> Result:
    completion = None
    if outcome in LIVE:
        completion = Completion(
            text=answer,
            finish_reason="stop",
            prompt_tokens=length,
            completion_tokens=completion_tokens,
            ttft_s=ttft_s,
            itl_s=(itl_s,) * (completion_tokens - 1),
            latency_s=ttft_s + itl_s * (completion_tokens - 1),
        )
    return Result(
        case_id=case_id,
        suite=suite,
        variant=variant,
        outcome=outcome,
        answer=answer,
        expected=("ZEBRA-4492-OMEGA",),
        target_tokens=length,
        depth_percent=depth,
        prompt_tokens=length,
        completion=completion,
        error=None if outcome in LIVE else f"{outcome}: from the test",
        started_at=started_at,
        finished_at=started_at + 1.0,
    )


def run_of(
    label: str,
    lengths: Sequence[int],
    depths: Sequence[float] = (50.0,),
    *,
    dtype: str = "fp8",
    server_info: dict | None = None,
    time_to_ready_s: float | None = 3.0,
    run_id: str | None = None,
) -> Run:
    return Run(
        run_id=run_id or f"run-{label}",
        spec=RunSpec(lengths=tuple(lengths), depths=tuple(depths), variant=label),
        profile=Profile(name="reference", engine="reference", index_k_dtype=dtype),  # type: ignore[arg-type]
        server_info=server_info or {},
        time_to_ready_s=time_to_ready_s,
        status="finished",
        created_at=1_700_000_000.0,
        finished_at=1_700_000_100.0,
    )


def variant(label: str, results: list[Result], **run_kwargs: object) -> VariantRun:
    lengths = sorted({r.target_tokens for r in results})
    depths = sorted({r.depth_percent for r in results})
    run = run_of(label, lengths, depths, **run_kwargs)  # type: ignore[arg-type]
    return VariantRun(label=label, run_dir=Path(f"/nonexistent/{run.run_id}"), run=run, results=results)


def paired_results(
    pairs: Sequence[tuple[Outcome, Outcome, int]], *, b_speed: float = 1.0
) -> tuple[list[Result], list[Result]]:
    """(A results, B results) from (outcome under A, outcome under B, length) triples, one case each.

    b_speed scales B's decode speed (its inter-token gaps are divided by it)."""
    a_results, b_results = [], []
    for index, (a_outcome, b_outcome, length) in enumerate(pairs):
        depth = float(index % 3 * 50)
        a_results.append(result(f"c{index}", a_outcome, length, depth))
        b_results.append(result(f"c{index}", b_outcome, length, depth, itl_s=0.02 / b_speed))
    return a_results, b_results


def store_run(root: Path, run: Run, results: list[Result]) -> Path:
    """Write a real run directory with the store; returns its path."""
    store = RunStore.create(run, root)
    for item in results:
        store.append_result(item)
    return store.path
