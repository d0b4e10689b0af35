"""CPU speed of the reference engine (in-process, no HTTP), printed as a table.

    python tests/benchmarks/bench_reference_cpu.py [--threads 2] [--lengths 1024,4096,16384,22597]

For each prompt length: a needle prompt from the needle suite (eval pool) rendered with the chat
template and sized to at most that many tokens; prefill = time to the first generated token;
decode tok/s = (generated - 1) / (time from first to last token); "prompt+16 s" = time from the
call to the 16th generated token (the issue's 16-token answer); the answer itself runs until
<|end|> (at most 24 tokens) and is checked. Each cell is the median of --repeats runs; the load
average is printed because a shared machine slows small-op decoding a lot.
The issue's target: 22,597-token prompt + 16-token answer in at most 10 s on 2 cores. The engine runs
with the server's malloc settings (launchers/reference/allocator.py) unless --default-malloc; "prefill CPU
s" is the CPU time of all threads to the first token (steadier than wall time on a shared machine).
The prefix cache is off: every repeat sends the same prompt, which it would otherwise not prefill again.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import torch  # noqa: E402

from launchers.reference.allocator import keep_freed_memory  # noqa: E402
from launchers.reference.engine import ReferenceEngine  # noqa: E402
from launchers.reference.engine_api import EngineSettings  # noqa: E402
from launchers.reference.training.evaluate import build_cases  # noqa: E402

ANSWER_TOKENS = 16
MAX_NEW = 24


def time_request(engine: ReferenceEngine, prompt: list[int]) -> tuple[float, float, int, float, str, float]:
    """(prefill s, decode s, generated tokens, s to the 16th token, answer text, prefill CPU s of all
    threads) for one request."""
    start, cpu = time.perf_counter(), time.process_time()
    first = last = at_16 = start
    n, text = 0, ""
    for step in engine.generate(prompt, MAX_NEW):
        now = time.perf_counter()
        if n == 0:
            first, cpu = now, time.process_time() - cpu
        last, n = now, n + 1
        if n == ANSWER_TOKENS:
            at_16 = now
        text += step.text
    return first - start, last - first, n, (at_16 if n >= ANSWER_TOKENS else last) - start, text, cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--lengths", default="1024,4096,16384,22597")
    parser.add_argument("--dtypes", default="fp8,bf16")
    parser.add_argument("--index-topk", type=int, default=512)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument(
        "--default-malloc",
        action="store_true",
        help="keep glibc's default allocator (the server sets launchers/reference/allocator.py's settings)",
    )
    args = parser.parse_args()
    malloc = "glibc default" if args.default_malloc or not keep_freed_memory() else "kept (as the server)"
    lengths = [int(n) for n in args.lengths.split(",")]
    cases = build_cases(lengths, [50.0], 1, 7, workers=1)
    rows = []
    for dtype in args.dtypes.split(","):
        t0 = time.perf_counter()
        engine = ReferenceEngine(
            EngineSettings(
                index_k_dtype=dtype,  # type: ignore[arg-type]
                index_topk=args.index_topk,
                threads=args.threads,
                prefix_cache=False,  # each repeat prefills its whole prompt (a cache hit would skip it)
            )
        )
        load_s = time.perf_counter() - t0
        time_request(engine, cases[0].ids[:200])  # warm-up
        for case in cases:
            runs = [time_request(engine, case.ids) for _ in range(args.repeats)]
            prefill = statistics.median(r[0] for r in runs)
            decode_rate = statistics.median((r[2] - 1) / r[1] for r in runs if r[2] > 1 and r[1] > 0)
            to_16 = statistics.median(r[3] for r in runs)
            ok = "yes" if all(case.expected[0] in r[4] for r in runs) else "no"
            prefill_cpu = statistics.median(r[5] for r in runs)
            rows.append((dtype, len(case.ids), prefill, decode_rate, to_16, load_s, ok, prefill_cpu))
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    print(
        f"reference engine on CPU: torch {torch.__version__}, {args.threads} threads, "
        f"index_topk {args.index_topk}, median of {args.repeats}, malloc {malloc}, load average {load}"
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
        "prefill CPU s",
    )
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for dtype, tokens, prefill, decode_rate, to_16, load_s, ok, prefill_cpu in rows:
        print(
            f"| {dtype} | {tokens} | {prefill:.2f} | {tokens / prefill:,.0f} | {decode_rate:.1f} | "
            f"{to_16:.2f} | {load_s:.2f} | {ok} | {prefill_cpu:.2f} |"
        )


if __name__ == "__main__":
    main()
