"""The order a sweep sends its cases in, against the reference engine's prefix cache: tokens prefilled.

    python tests/benchmarks/bench_send_order.py [--lengths 338..22597] [--trials 2] [--compute]

The default sweep's needle prompts (8 lengths x 5 depths x 2 trials, each sized to at most its length
in the reference tokenizer's tokens) go through the engine one at a time, as `recall-eval sweep` sends
them at concurrency 1, in two orders: the suites' grid order (length, depth, trial: the trials alternate)
and the send order of recall_eval.api.preparing.build_recipes (trial by trial, grid order within). Cases
of one trial share their filler stream, so with the prefix cache a prompt prefills only what no earlier
prompt of its trial began with. Printed per order and KV pool size: prompt tokens, tokens taken from the
cache, tokens prefilled. Without --compute the model is not run (the cache and the pool work as served,
so the counts are exact and take seconds); with --compute the engine runs for real at the server's
pool size (prefill and decode CPU seconds of this process, wall, whether every answer is the same).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # as the server (launchers/reference/server.py)

from launchers.reference.allocator import keep_freed_memory  # noqa: E402

keep_freed_memory()  # before torch allocates, as the server

import torch  # noqa: E402

from launchers.reference.engine import ReferenceEngine  # noqa: E402
from launchers.reference.engine_api import EngineSettings, StepOutput  # noqa: E402
from launchers.reference.inference import SequenceState  # noqa: E402
from launchers.reference.training.evaluate import EvalCase, build_cases  # noqa: E402
from recall_eval.api.preparing import build_recipes  # noqa: E402
from recall_eval.grid import parse_depths, parse_lengths  # noqa: E402
from recall_eval.types import RunSpec  # noqa: E402

MAX_NEW = 32  # the sweep's default max_tokens


class _NoCompute:
    """Stands in for the engine's Runner: the prefix cache and the pool see every request as served."""

    def prefill(self, seq: SequenceState, prompt: list[int], cached: int = 0) -> None:
        seq.length = len(prompt)

    def next_logits(self, seq: SequenceState, index_topk: int) -> tuple[torch.Tensor, torch.Tensor]:
        return torch.zeros(1), torch.zeros(1)

    def append(self, seq: SequenceState, token: int) -> None:
        seq.length += 1


def _orders(cases: list[EvalCase], spec: RunSpec) -> dict[str, list[EvalCase]]:
    by_cell = {(c.length, c.depth, c.trial): c for c in cases}
    send = [by_cell[(r.target_tokens, r.depth_percent, r.trial)] for r in build_recipes(spec)]
    return {"grid (length, depth, trial)": cases, "send order (trial, length, depth)": send}


def _run(engine: ReferenceEngine, cases: list[EvalCase], new_tokens: int) -> dict[str, object]:
    cached = prefill_cpu = decode_cpu = 0.0
    answers = []
    started = time.perf_counter()
    for case in cases:
        cpu = time.process_time()
        text = ""
        step: StepOutput
        for i, step in enumerate(engine.generate(case.ids, new_tokens)):
            if i == 0:
                cached += step.cached_tokens
                prefill_cpu += time.process_time() - cpu
                cpu = time.process_time()
            text += step.text
        decode_cpu += time.process_time() - cpu
        answers.append(text)
    return {
        "cached": int(cached),
        "prefill_cpu": prefill_cpu,
        "decode_cpu": decode_cpu,
        "wall": time.perf_counter() - started,
        "answers": answers,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--lengths", default="338..22597")
    parser.add_argument("--depths", default="0,25,50,75,100")
    parser.add_argument("--trials", type=int, default=2)
    parser.add_argument("--pools", default="32768,65536,262144", help="KV pool sizes (tokens) counted")
    parser.add_argument("--compute", action="store_true", help="also run the model (server pool size)")
    args = parser.parse_args()
    lengths, depths = parse_lengths(args.lengths), parse_depths(args.depths)
    spec = RunSpec(suites=["needle"], lengths=list(lengths), depths=list(depths), trials=args.trials, seed=0)
    started = time.perf_counter()
    cases = build_cases(lengths, depths, args.trials, 0, workers=2)
    total = sum(len(c.ids) for c in cases)
    print(f"{len(cases)} needle prompts, {total:,} tokens, built in {time.perf_counter() - started:.1f} s")
    print("| order | KV pool tokens | from the cache | prefilled | prefilled share |")
    print("|---|---|---|---|---|")
    for pool in (int(p) for p in args.pools.split(",")):
        for name, ordered in _orders(cases, spec).items():
            engine = ReferenceEngine(EngineSettings(max_total_tokens=pool))
            engine.runner = _NoCompute()  # type: ignore[assignment]
            cached = int(_run(engine, ordered, 1)["cached"])
            print(f"| {name} | {pool:,} | {cached:,} | {total - cached:,} | {(total - cached) / total:.0%} |")
    if not args.compute:
        return
    runs = {}
    for name, ordered in _orders(cases, spec).items():
        engine = ReferenceEngine(EngineSettings())
        engine.generate(ordered[0].ids[:64], 2).__next__()  # warm-up
        runs[name] = _run(engine, ordered, MAX_NEW)
    grid_answers = dict(zip(map(id, cases), runs["grid (length, depth, trial)"]["answers"], strict=True))
    send_cases = _orders(cases, spec)["send order (trial, length, depth)"]
    same = all(
        grid_answers[id(c)] == a
        for c, a in zip(send_cases, runs["send order (trial, length, depth)"]["answers"], strict=True)
    )
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    print(
        f"\nengine run (torch {torch.__version__}, {torch.get_num_threads()} threads, load average {load}):"
    )
    print("| order | prefilled | prefill CPU s | decode CPU s | wall s | same answers |")
    print("|---|---|---|---|---|---|")
    for name, run in runs.items():
        print(
            f"| {name} | {total - int(run['cached']):,} | {run['prefill_cpu']:.1f} | {run['decode_cpu']:.1f} |"
            f" {run['wall']:.1f} | {'yes' if same else 'NO'} |"
        )


if __name__ == "__main__":
    main()
