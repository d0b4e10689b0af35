"""CPU speed of the reference engine (in-process, no HTTP), printed as a table.

    python tests/benchmarks/bench_reference_cpu.py [--threads 2] [--lengths 1024,4096,16384,22597]

For each prompt length: a needle prompt from the needle suite (eval pool) rendered with the chat
template and sized to exactly that many tokens; prefill = time to the first generated token;
decode tok/s = (generated - 1) / (time from first to last token); total = prefill + decode of a
16-token answer (the answer's own length; eos is not waited for). Also the model load time.
The issue's target: 22,597-token prompt + 16-token answer in at most 10 s on 2 cores.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import torch  # noqa: E402

from launchers.reference.engine import ReferenceEngine  # noqa: E402
from launchers.reference.engine_api import EngineSettings  # noqa: E402
from launchers.reference.evaluate import build_cases  # noqa: E402

ANSWER_TOKENS = 16


def time_request(engine: ReferenceEngine, prompt: list[int]) -> tuple[float, float, int, str]:
    """(prefill s, decode s, generated tokens, answer text) for one greedy request."""
    start = time.perf_counter()
    first = last = start
    n, text = 0, ""
    for step in engine.generate(prompt, ANSWER_TOKENS):
        now = time.perf_counter()
        if n == 0:
            first = now
        last, n = now, n + 1
        text += step.text
    return first - start, last - first, n, text


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--lengths", default="1024,4096,16384,22597")
    parser.add_argument("--dtypes", default="fp8,bf16")
    parser.add_argument("--index-topk", type=int, default=512)
    args = parser.parse_args()
    lengths = [int(n) for n in args.lengths.split(",")]
    cases = build_cases(lengths, [50.0], 1, 7, workers=1)
    rows = []
    for dtype in args.dtypes.split(","):
        t0 = time.perf_counter()
        engine = ReferenceEngine(
            EngineSettings(index_k_dtype=dtype, index_topk=args.index_topk, threads=args.threads)  # type: ignore[arg-type]
        )
        load_s = time.perf_counter() - t0
        time_request(engine, cases[0].ids[:200])  # warm-up
        for case in cases:
            prefill, decode, n, text = time_request(engine, case.ids)
            ok = "yes" if case.expected[0] in text else "no"
            rows.append((dtype, len(case.ids), prefill, decode, n, load_s, ok))
    print(
        f"reference engine on CPU: torch {torch.__version__}, {args.threads} threads, index_topk {args.index_topk}"
    )
    head = (
        "index K",
        "prompt tokens",
        "prefill s",
        "prefill tok/s",
        "decode tok/s",
        "prompt+16 s",
        "load s",
        "answer ok",
    )
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for dtype, tokens, prefill, decode, n, load_s, ok in rows:
        decode_rate = (n - 1) / decode if n > 1 and decode > 0 else float("nan")
        print(
            f"| {dtype} | {tokens} | {prefill:.2f} | {tokens / prefill:,.0f} | {decode_rate:.1f} | "
            f"{prefill + decode:.2f} | {load_s:.2f} | {ok} |"
        )


if __name__ == "__main__":
    main()
