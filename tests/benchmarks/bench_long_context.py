"""One 131,072-token needle case answered by the reference engine on CPU: its time and the server's peak RSS.

python tests/benchmarks/bench_long_context.py [--length 131072] [--index-k-dtype fp8]

Starts the reference server with --context-length LENGTH + 256 (the weights' own default is 32,768),
runs `recall-eval sweep --base-url URL --suite needle --lengths LENGTH --depths 50 --trials 1` against
it as a user would, and prints the case's outcome, its prompt tokens, the time to first token, the
sweep's wall time and the server's peak resident memory (VmHWM) before it is stopped.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from tempfile import TemporaryDirectory

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.e2e.cli import run_cli  # noqa: E402 - after the path fix
from tests.e2e.reference_server import start_server, wait_ready  # noqa: E402


def peak_rss_gib(pid: int) -> float:
    """The process's peak resident set (VmHWM) in GiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 2**20
    raise RuntimeError(f"no VmHWM for pid {pid}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--length", type=int, default=131072)
    parser.add_argument("--index-k-dtype", default="fp8", choices=["fp8", "bf16", "fp4"])
    args = parser.parse_args()
    with TemporaryDirectory() as tmp:
        home = Path(tmp)
        started = time.perf_counter()
        server = start_server(
            home,
            "--context-length",
            str(args.length + 256),
            "--index-k-dtype",
            args.index_k_dtype,
        )
        try:
            ready_s = wait_ready(server, 300.0, started)
            idle_gib = peak_rss_gib(server.process.pid)
            sweep_started = time.perf_counter()
            done = run_cli(
                "sweep",
                "--base-url",
                server.base_url,
                "--suite",
                "needle",
                "--lengths",
                str(args.length),
                "--depths",
                "50",
                "--trials",
                "1",
                "--request-timeout",
                "1800",
                home=home,
                cwd=home,
                timeout=3600,
            )
            sweep_s = time.perf_counter() - sweep_started
            peak_gib = peak_rss_gib(server.process.pid)
        finally:
            server.stop()
        if done.returncode not in (0, 4):
            raise SystemExit(f"sweep exited {done.returncode}:\n{done.stderr[-3000:]}")
        (run_dir,) = [p for p in home.iterdir() if (p / "results.jsonl").is_file()]  # RECALL_EVAL_HOME
        (result,) = [json.loads(line) for line in (run_dir / "results.jsonl").read_text().splitlines()]
    completion = result.get("completion") or {}
    print(
        "| index keys | prompt tokens | outcome | TTFT s | sweep wall s | server ready s | peak RSS GiB (idle) |"
    )
    print("|---|---|---|---|---|---|---|")
    print(
        f"| {args.index_k_dtype} | {result.get('prompt_tokens')} | {result['outcome']} | "
        f"{completion.get('ttft_s') or float('nan'):.1f} | {sweep_s:.1f} | {ready_s:.1f} | "
        f"{peak_gib:.2f} ({idle_gib:.2f}) |"
    )


if __name__ == "__main__":
    main()
