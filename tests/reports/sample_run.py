"""A run directory with a known mix of outcomes, written through the real store (for report tests)."""

from __future__ import annotations

import random
from pathlib import Path

from recall_eval.store import RunStore
from recall_eval.types import Completion, Outcome, Profile, Result, Run, RunSpec

LENGTHS = (338, 1000, 4509, 22597)
DEPTHS = (0.0, 25.0, 50.0, 75.0, 100.0)
TRIALS = 2
SCRIPT_ANSWER = "<script>document.body.setAttribute('data-pwned', 'yes')</script> FALCON-1234-DELTA"
IMG_ANSWER = '<img src=x onerror="document.title=\'pwned\'"> & "quotes"'


def planned_outcome(length: int, depth: float, trial: int) -> tuple[Outcome, str | None]:
    """The outcome each case gets: all too_long at the longest length, misses in the middle, one OOM."""
    if length == 22597:
        return "too_long", "prompt of 22,610 tokens exceeds the context length 16,384"
    if length == 1000 and depth == 75.0 and trial == 1:
        return "oom", "server died: torch.OutOfMemoryError: CUDA out of memory (log line 812)"
    if length == 4509 and depth in (25.0, 50.0):
        return ("miss" if trial == 0 else "truncated"), None
    if length == 4509 and depth == 100.0 and trial == 0:
        return "empty", None
    return "pass", None


def _answer(outcome: Outcome, expected: str, length: int, depth: float, trial: int) -> str:
    if outcome == "pass":
        return f"The value is {expected}."
    if outcome == "miss" and depth == 25.0:
        return SCRIPT_ANSWER
    if outcome == "miss":
        return IMG_ANSWER
    if outcome == "truncated":
        return "Let me look through the document carefully to find the"
    return ""


def build_sample_run(root: Path, status: str = "finished") -> Path:
    rng = random.Random(7)
    spec = RunSpec(lengths=LENGTHS, depths=DEPTHS, trials=TRIALS, seed=3, max_tokens=32, concurrency=2)
    profile = Profile(
        name="reference-cpu",
        engine="reference",
        context_length=16384,
        index_topk=512,
        index_k_dtype="fp8",
        env={"HF_TOKEN": "hf_secret_value", "OMP_NUM_THREADS": "2"},
    )
    run = Run(
        run_id="20250101-000000-abcdef",
        spec=spec,
        profile=profile,
        server_info={"model": "reference-dsa", "max_total_tokens": 16384, "args": {"tp": 1}},
        time_to_ready_s=3.25,
        relaunches=1,
        versions={"recall-eval": "0.1.0", "python": "3.11.2", "server": "reference 0.1"},
        status="running",
        created_at=1735689600.0,
    )
    store = RunStore.create(run, root)
    clock = 1735689601.0
    for length in LENGTHS:
        for depth in DEPTHS:
            for trial in range(TRIALS):
                outcome, error = planned_outcome(length, depth, trial)
                expected = f"ZEBRA-{rng.randrange(1000, 9999)}-OMEGA"
                completion = None
                if outcome not in ("too_long", "oom"):
                    n_tokens = 0 if outcome == "empty" else rng.randrange(6, 12)
                    gaps = tuple(round(rng.uniform(0.015, 0.03), 4) for _ in range(max(n_tokens - 1, 0)))
                    completion = Completion(
                        text=_answer(outcome, expected, length, depth, trial),
                        finish_reason="length" if outcome == "truncated" else "stop",
                        prompt_tokens=length + rng.randrange(-3, 4),
                        completion_tokens=n_tokens,
                        ttft_s=round(0.02 + length * rng.uniform(4e-5, 6e-5), 4),
                        itl_s=gaps,
                        latency_s=1.0,
                    )
                store.append_result(
                    Result(
                        case_id=f"needle-{length}-{depth:g}-{trial}",
                        suite="needle",
                        variant="default",
                        outcome=outcome,
                        answer=completion.text if completion else "",
                        expected=(expected,),
                        target_tokens=length,
                        depth_percent=depth,
                        trial=trial,
                        prompt_tokens=length,
                        tokenizer="server:/v1/tokenize",
                        completion=completion,
                        error=error,
                        started_at=clock,
                        finished_at=clock + 1,
                    )
                )
                clock += 1
    store.write_run(run.model_copy(update={"status": status, "finished_at": clock}))
    return store.path
