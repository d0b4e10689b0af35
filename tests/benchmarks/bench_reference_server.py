"""Benchmarks of the reference server through HTTP, each printing a table.

python tests/benchmarks/bench_reference_server.py speed [--prompt-tokens 22597 --answer-tokens 16]
    Start the server, send one streamed chat request whose rendered prompt is exactly
    --prompt-tokens tokens (calibrated with the server's /v1/tokenize) with max_tokens
    --answer-tokens, and time it as recall-eval's client does: TTFT = request sent -> first
    content chunk, decode tok/s = (completion tokens - 1) / (last chunk - first chunk).

python tests/benchmarks/bench_reference_server.py oom --memory-limit-gb G --max-total-tokens T
    For each index-key dtype, bisect the prompt length at which a prefill dies under the same
    memory cap and pool size: each probe starts a fresh server, sends one /generate request of
    that many tokens, and records whether the server answered or died logging SGLang's
    "Prefill out of memory" line (any other outcome is reported as such).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from tempfile import TemporaryDirectory

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.e2e.reference_server import start_server, wait_ready  # noqa: E402 - after the path fix
from tests.launchers.reference.test_server_http import words  # noqa: E402

PROBE_TIMEOUT_S = 300.0


@dataclass(frozen=True)
class SpeedRow:
    label: str
    ready_s: float
    prompt_tokens: int
    completion_tokens: int
    ttft_s: float
    decode_tok_s: float | None
    total_s: float


def calibrated_prompt_ids(client: httpx.Client, target: int) -> list[int]:
    """Token ids of a rendered chat prompt (template + generation prompt) of exactly `target` tokens."""

    def tokens(n_words: int) -> list[int]:
        messages = [{"role": "user", "content": words(n_words, seed=11)}]
        return client.post("/v1/tokenize", json={"messages": messages}).json()["tokens"]

    lo, hi = 1, max(2, target)
    while len(tokens(hi)) < target:
        hi *= 2
    while lo < hi:  # smallest word count reaching the target
        mid = (lo + hi) // 2
        lo, hi = (mid + 1, hi) if len(tokens(mid)) < target else (lo, mid)
    ids = tokens(lo)
    tail = tokens(1)[-1:]  # keep the generation prompt at the end when trimming
    return ids[: target - len(tail)] + tail if len(ids) > target else ids


def timed_generate(
    client: httpx.Client, prompt_ids: list[int], max_new_tokens: int
) -> tuple[int, list[float], float]:
    """Streamed /generate (one event per token): completion tokens, event times after sending, total."""
    body = {"input_ids": prompt_ids, "sampling_params": {"max_new_tokens": max_new_tokens}, "stream": True}
    times: list[float] = []
    completion = 0
    sent = time.perf_counter()
    with client.stream("POST", "/generate", json=body) as response:
        response.raise_for_status()
        for line in response.iter_lines():
            if line.startswith("data: ") and line != "data: [DONE]":
                event = json.loads(line[len("data: ") :])
                if event["meta_info"]["completion_tokens"] > completion:
                    completion = event["meta_info"]["completion_tokens"]
                    times.append(time.perf_counter() - sent)
    return completion, times, time.perf_counter() - sent


def run_speed(args: argparse.Namespace) -> None:
    rows = []
    context = args.prompt_tokens + args.answer_tokens + 64
    for dtype in args.dtypes:
        with TemporaryDirectory() as logs:
            started = time.perf_counter()
            flags = [
                "--context-length",
                str(context),
                "--max-total-tokens",
                str(context),
                "--index-k-dtype",
                dtype,
            ]
            server = start_server(Path(logs), *flags)
            try:
                ready_s = wait_ready(server, 120.0, started)
                with httpx.Client(base_url=server.base_url, timeout=600.0) as client:
                    prompt_ids = calibrated_prompt_ids(client, args.prompt_tokens)
                    timed_generate(client, prompt_ids[:64], 2)  # warm-up
                    completion, times, total = timed_generate(client, prompt_ids, args.answer_tokens)
            finally:
                server.stop()
        decode = (completion - 1) / (times[-1] - times[0]) if completion > 1 else None
        rows.append(SpeedRow(dtype, ready_s, len(prompt_ids), completion, times[0], decode, total))
    load = " ".join(f"{x:.1f}" for x in os.getloadavg())
    print(
        f"\nreference server over HTTP (streamed /generate), {args.prompt_tokens}-token prompt + "
        f"{args.answer_tokens}-token answer; {os.cpu_count()} CPUs, load average {load}"
    )
    header = (
        f"{'index_k':>8} {'ready s':>8} {'prompt':>7} {'answer':>7} {'TTFT s':>8} "
        f"{'prefill tok/s':>14} {'decode tok/s':>13} {'total s':>8}"
    )
    print(header)
    print("-" * len(header))
    for r in rows:
        decode = f"{r.decode_tok_s:.1f}" if r.decode_tok_s is not None else "n/a"
        print(
            f"{r.label:>8} {r.ready_s:>8.2f} {r.prompt_tokens:>7} {r.completion_tokens:>7} {r.ttft_s:>8.2f} "
            f"{r.prompt_tokens / r.ttft_s:>14.0f} {decode:>13} {r.total_s:>8.2f}"
        )


def probe(
    log_dir: Path,
    dtype: str,
    args: argparse.Namespace,
    prompt_ids: list[int],
    length: int,
    kv_bytes: dict[str, int],
) -> str:
    """'ok', 'prefill-oom', 'startup-oom' or 'other: ...' for one fresh server and one prompt.

    Records the server's kv_bytes_per_token in kv_bytes[dtype].
    """
    flags = [
        "--memory-limit-gb", str(args.memory_limit_gb), "--max-total-tokens", str(args.max_total_tokens),
        "--context-length", str(args.max_prompt_tokens + 64), "--index-k-dtype", dtype,
    ]  # fmt: skip
    started = time.perf_counter()
    server = start_server(log_dir, *flags)
    try:
        try:
            wait_ready(server, 120.0, started)
        except AssertionError:
            return "startup-oom" if "Not enough memory" in server.log() else "other: did not start"
        info = httpx.get(f"{server.base_url}/server_info", timeout=30).json()
        kv_bytes[dtype] = info["kv_bytes_per_token"]
        body = {"input_ids": prompt_ids[:length], "sampling_params": {"max_new_tokens": 1}}
        try:
            response = httpx.post(f"{server.base_url}/generate", json=body, timeout=PROBE_TIMEOUT_S)
            if response.status_code == 200:
                return "ok"
            return f"other: HTTP {response.status_code} {response.text[:120]}"
        except httpx.TransportError:
            server.process.wait(timeout=30)
            if server.process.returncode != 0 and "Prefill out of memory" in server.log():
                return "prefill-oom"
            return f"other: exit {server.process.returncode}"
    finally:
        server.stop()


def reference_ids(log_dir: Path, n: int) -> list[int]:
    started = time.perf_counter()
    server = start_server(log_dir, "--context-length", str(n + 64), "--max-total-tokens", str(n + 64))
    try:
        wait_ready(server, 60.0, started)
        text = words(n, seed=12)
        ids = httpx.post(f"{server.base_url}/v1/tokenize", json={"prompt": text}, timeout=120).json()[
            "tokens"
        ]
    finally:
        server.stop()
    assert len(ids) >= n, (len(ids), n)
    return ids[:n]


def run_oom(args: argparse.Namespace) -> None:
    with TemporaryDirectory() as logs:
        log_dir = Path(logs)
        hi_start = args.max_prompt_tokens
        ids = reference_ids(log_dir, hi_start)
        results = {}
        kv_bytes: dict[str, int] = {}
        for dtype in args.dtypes:
            lo, hi = 1, hi_start  # lo survives, hi dies (checked)
            top = probe(log_dir, dtype, args, ids, hi, kv_bytes)
            if top != "prefill-oom":
                results[dtype] = f"no prefill death up to {hi} tokens ({top})"
                continue
            bottom = probe(log_dir, dtype, args, ids, lo, kv_bytes)
            if bottom != "ok":
                results[dtype] = f"even a 1-token prompt fails ({bottom})"
                continue
            while hi - lo > args.resolution:
                mid = (lo + hi) // 2
                outcome = probe(log_dir, dtype, args, ids, mid, kv_bytes)
                print(f"  {dtype}: {mid} tokens -> {outcome}", flush=True)
                if outcome == "ok":
                    lo = mid
                elif outcome == "prefill-oom":
                    hi = mid
                else:
                    raise SystemExit(f"unexpected probe outcome at {mid} tokens ({dtype}): {outcome}")
            results[dtype] = f"survives {lo}, dies at {hi} (Prefill out of memory)"
    print(
        f"\nprefill death length under RLIMIT_DATA={args.memory_limit_gb} GiB, "
        f"--max-total-tokens {args.max_total_tokens} (bisected to {args.resolution} tokens)"
    )
    print(f"{'index_k':>8} {'KV B/token':>10} {'pool MiB':>9}  result")
    for dtype, result in results.items():
        per_token = kv_bytes.get(dtype, 0)
        pool_mib = per_token * args.max_total_tokens / 2**20
        print(f"{dtype:>8} {per_token:>10} {pool_mib:>9.1f}  {result}")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = parser.add_subparsers(dest="command", required=True)
    speed = sub.add_parser("speed")
    speed.add_argument("--prompt-tokens", type=int, default=22597)
    speed.add_argument("--answer-tokens", type=int, default=16)
    speed.add_argument("--dtypes", nargs="+", default=["fp8", "bf16"], choices=["fp8", "bf16"])
    oom = sub.add_parser("oom")
    oom.add_argument("--memory-limit-gb", type=float, required=True)
    oom.add_argument("--max-total-tokens", type=int, required=True)
    oom.add_argument("--max-prompt-tokens", type=int, default=32000, help="upper end of the bisection")
    oom.add_argument("--resolution", type=int, default=256)
    oom.add_argument("--dtypes", nargs="+", default=["fp8", "bf16"], choices=["fp8", "bf16"])
    args = parser.parse_args()
    run_speed(args) if args.command == "speed" else run_oom(args)


if __name__ == "__main__":
    main()
