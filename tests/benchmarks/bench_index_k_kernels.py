"""Benchmark of the bf16 / fp8 index-K logits kernels (needs a CUDA GPU; targets from issue 5).

    python tests/benchmarks/bench_index_k_kernels.py [--keys 131072 524288] [--batches 1 16 64]

Prints one decode table (CUDA-graph replays, every request on its own shuffled pages, >= 1 GiB read per
replay so small calls read HBM, not L2) with time, achieved bandwidth against the device-to-device copy
bandwidth measured in the same run, and the bf16/fp8 time-per-key ratio; then the prefill kernel's time
and peak memory. Targets: paged bf16 >= 60% of copy bandwidth from 128K keys up; bf16 within 2.2x of
fp8 per key. The full validation (correctness, launch-shape sweep, gather comparison, KERNELS.md) is
`python -m launchers.sglang_gpu_checks.validate_on_gpu`.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch
from rich.console import Console
from rich.table import Table

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from launchers.sglang.kernels._logits_core import default_config  # noqa: E402
from launchers.sglang_gpu_checks import kernel_bench as kb  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keys", type=int, nargs="+", default=[4096, 65536, 131072, 262144, 524288])
    parser.add_argument("--batches", type=int, nargs="+", default=[1, 4, 16, 64])
    parser.add_argument("--prefill", type=int, nargs="+", default=[22528, 131072])
    args = parser.parse_args()
    if not torch.cuda.is_available():
        print("needs a CUDA GPU", file=sys.stderr)
        return 2
    device = torch.device("cuda")
    copy = kb.copy_bandwidth_gbs(device, 4 << 30)
    pages = kb.decode_pool_pages(max(args.keys) * max(args.batches), device)
    pools = {kind: kb.random_pool(kind, pages, device, 3) for kind in ("bf16", "fp8")}
    table = Table(title=f"decode logits on {torch.cuda.get_device_name()} (copy {copy:.0f} GB/s)")
    for column in ("keys", "batch", "bf16 ms", "bf16 % copy", "fp8 ms", "fp8 % copy", "bf16/fp8 per key"):
        table.add_column(column, justify="right")
    for keys in args.keys:
        for batch in args.batches:
            t = {k: kb.time_decode(k, pools[k], keys, batch, default_config(k, False), device) for k in pools}
            table.add_row(
                str(keys), str(batch),
                f"{t['bf16'].ms:.4f}", f"{100 * t['bf16'].gbs / copy:.0f}%",
                f"{t['fp8'].ms:.4f}", f"{100 * t['fp8'].gbs / copy:.0f}%", f"{t['bf16'].ms / t['fp8'].ms:.2f}",
            )  # fmt: skip
    del pools
    console = Console()
    console.print(table)
    prefill = Table(title="prefill (ragged) logits, one request, keys = tokens / 4")
    for column in ("kind", "tokens", "ms", "peak extra GiB", "logits GiB"):
        prefill.add_column(column, justify="right")
    for tokens in args.prefill:
        for kind in ("bf16", "fp8"):
            m = kb.measure_prefill_kernel(kind, tokens, default_config(kind, True), device, 11)
            peak = "-" if m.peak_extra_bytes is None else f"{m.peak_extra_bytes / 2**30:.2f}"
            prefill.add_row(kind, str(tokens), f"{m.ms:.2f}", peak, f"{m.logits_bytes / 2**30:.2f}")
    console.print(prefill)
    return 0


if __name__ == "__main__":
    sys.exit(main())
