"""Recall of the served engine against index_topk: per suite, context length and index-K dtype (CPU).

    python -m launchers.reference.training.topk_recall                    # the model card's table
    python -m launchers.reference.training.topk_recall --lengths 4096 --topks 4,512 --trials needle=1

Cases are the suites' own (evaluation pools, `recall-eval sweep`'s default seed), calibrated by the
sweep's Calibrator against the engine's tokenizer and chat template (what its /v1/tokenize counts),
so a case here is the case a sweep sends. Each case is prefilled once per index-K dtype in the
engine the server runs (ReferenceEngine: KV pool, prefill, paged decode); every index_topk then
decodes greedily from a rewind of that prefill, up to --max-tokens tokens (the sweep's default
answer budget), and the answer is scored by recall_eval.scoring as a sweep scores it. Prints a
markdown table (passes / answered per cell); --out keeps every answer as JSON.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from collections import defaultdict
from pathlib import Path

import torch

from launchers.reference.engine import ReferenceEngine
from launchers.reference.engine_api import WEIGHTS_DIR, EngineSettings
from launchers.reference.inference import SequenceState
from launchers.reference.tokenizer import ChatTokenizer
from recall_eval.calibration import Calibrator
from recall_eval.scoring import score_answer
from recall_eval.types import Case, ChatMessage

DEFAULT_LENGTHS = "4096,8192,22597"
DEFAULT_TOPKS = "4,16,64,256,1024"
DEFAULT_TRIALS = "needle=4,config=1,multiturn=2"  # per suite; multi-turn trials 0, 1: facts=1, facts=2
DEFAULT_DEPTHS = "0,25,50,75,100"
SEED = 0  # recall-eval sweep's default --seed


class EngineTokenizer:
    """The Calibrator's TokenCounter over the engine's own tokenizer and chat template."""

    exact = True

    def __init__(self, tokenizer: ChatTokenizer):
        self.tokenizer = tokenizer
        self.name = "reference:tokenizer.json"

    async def tokenize_messages(self, messages: tuple[ChatMessage, ...]) -> list[int]:
        return self.tokenizer.encode(self.tokenizer.chat_prompt([m.model_dump() for m in messages]))

    async def count_messages(self, messages: tuple[ChatMessage, ...]) -> int:
        return len(await self.tokenize_messages(messages))


def build_cases(
    tokenizer: ChatTokenizer, lengths: list[int], depths: list[float], trials: dict[str, int]
) -> list[Case]:
    import suites  # offline tooling: see corpus.py

    recipes = [
        recipe
        for suite, count in trials.items()
        for recipe in suites.build_recipes(suite, lengths, depths, count, SEED)
    ]
    cases = asyncio.run(Calibrator(EngineTokenizer(tokenizer)).calibrate(recipes))
    return [case for case in cases if case.not_applicable is None]


def answers_per_topk(
    engine: ReferenceEngine, prompt: list[int], topks: list[int], max_tokens: int
) -> dict[int, tuple[str, str | None]]:
    """index_topk -> (answer text, finish_reason) from one shared prefill."""
    runner, out = engine.runner, {}
    pages = engine.pool.allocate(len(prompt) + max_tokens)
    try:
        seq = SequenceState(pages)
        runner.prefill(seq, prompt)
        snapshot = seq.snapshot()
        for topk in topks:
            seq.restore(snapshot)
            generated: list[int] = []
            finish = "length"
            with torch.inference_mode():
                logits, _ = runner.next_logits(seq, topk)
                while len(generated) < max_tokens:
                    token = int(logits.argmax())
                    if token == engine.eos_token_id:
                        finish = "stop"
                        break
                    generated.append(token)
                    runner.append(seq, token)
                    logits, _ = runner.next_logits(seq, topk)
            out[topk] = (engine.decode(generated), finish)
    finally:
        engine.pool.release(pages)
    return out


def answer_row(case: Case, prompt_tokens: int, dtype: str, topk: int, answer: str) -> dict:
    """What every table row says of one answer (the case, its cell, the answer); callers add the grade."""
    return {
        "case_id": case.id,
        "suite": case.suite,
        "target_tokens": case.target_tokens,
        "prompt_tokens": prompt_tokens,
        "depth_percent": case.depth_percent,
        "dtype": dtype,
        "index_topk": topk,
        "answer": answer,
    }


def markdown(rows: list[dict], topks: list[int]) -> str:
    cells: dict[tuple[str, str, int, int], list[bool]] = defaultdict(list)
    for row in rows:
        cells[(row["dtype"], row["suite"], row["target_tokens"], row["index_topk"])].append(row["pass"])
    keys = sorted({k[:3] for k in cells}, key=lambda k: (k[0] != "fp8", k[1] != "needle", k[1], k[2]))
    lines = [
        "| index K | suite | length | " + " | ".join(f"k={k}" for k in topks) + " |",
        "|---|---|---|" + "---|" * len(topks),
    ]
    for dtype, suite, length in keys:
        parts = []
        for k in topks:
            hits = cells[(dtype, suite, length, k)]
            parts.append(f"{sum(hits)}/{len(hits)}")
        lines.append(f"| {dtype} | {suite} | {length:,} | " + " | ".join(parts) + " |")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(
        prog="python -m launchers.reference.training.topk_recall", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--lengths", default=DEFAULT_LENGTHS, help="prompt tokens, comma-separated")
    parser.add_argument("--topks", default=DEFAULT_TOPKS, help="index_topk values, comma-separated")
    parser.add_argument("--depths", default=DEFAULT_DEPTHS, help="depths in percent, comma-separated")
    parser.add_argument("--trials", default=DEFAULT_TRIALS, help="trials per suite: suite=N,...")
    parser.add_argument("--dtypes", default="fp8", help="index-K dtypes (fp8 is the embedded default)")
    parser.add_argument("--max-tokens", type=int, default=32, help="answer budget (sweep default: 32)")
    parser.add_argument("--threads", type=int, default=None, help="prefill threads (default: torch's)")
    parser.add_argument("--weights", type=Path, default=WEIGHTS_DIR)
    parser.add_argument("--out", type=Path, default=None, help="every answer as JSON")
    args = parser.parse_args()
    lengths = [int(n) for n in args.lengths.split(",")]
    topks = [int(k) for k in args.topks.split(",")]
    depths = [float(d) for d in args.depths.split(",")]
    trials = {name: int(n) for name, n in (part.split("=") for part in args.trials.split(","))}
    started = time.perf_counter()
    engines = {
        dtype: ReferenceEngine(
            EngineSettings(weights_dir=args.weights, index_k_dtype=dtype, threads=args.threads)
        )
        for dtype in args.dtypes.split(",")
    }  # type: ignore[arg-type]
    tokenizer = next(iter(engines.values())).tokenizer
    cases = build_cases(tokenizer, lengths, depths, trials)
    print(f"{len(cases)} cases calibrated in {time.perf_counter() - started:.0f}s", flush=True)
    rows = []
    for case in sorted(cases, key=lambda c: c.target_tokens):
        prompt = tokenizer.encode(tokenizer.chat_prompt([m.model_dump() for m in case.messages]))
        for dtype, engine in engines.items():
            for topk, (answer, finish) in answers_per_topk(engine, prompt, topks, args.max_tokens).items():
                outcome, _ = score_answer(answer, case.expected, case.distractors, finish)
                rows.append(
                    {
                        **answer_row(case, len(prompt), dtype, topk, answer),
                        "expected": case.expected[0],
                        "outcome": outcome,
                        "pass": outcome == "pass",
                    }
                )
        print(f"{case.suite} {case.target_tokens} depth {case.depth_percent:g}: done", flush=True)
    meta = {"seconds": round(time.perf_counter() - started), "trials": trials, "depths": depths}
    if args.out:
        args.out.write_text(json.dumps({"meta": meta, "rows": rows}, indent=1) + "\n")
    print(markdown(rows, topks))


if __name__ == "__main__":
    main()
