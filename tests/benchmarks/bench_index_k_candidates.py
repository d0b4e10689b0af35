"""bf16 index-K launch-shape candidates in one GPU run: each checked against the fp64 reference on fresh
inputs, then timed; plus the launch overhead of an empty kernel timed the same way.

    python tests/benchmarks/bench_index_k_candidates.py [--json out.json] [--quick]

Decode: CUDA-graph replays of many calls on disjoint shuffled pages (`kernel_bench.time_decode`, as
KERNELS.md), us per call and % of the copy bandwidth measured in the same run. Launch overhead: an empty
kernel of the same grid (one request of 128K keys: 512 programs on an H200) timed the same way, with and
without programmatic dependent launch: what a call costs before it reads a byte. Prefill: one causal
request, median ms (`kernel_bench.measure_prefill_kernel`), and the share of the bf16 tensor-core ceiling
(an 8192^3 cuBLAS product, same run) the useful products reach (each row's causal keys x 64 heads x 128 x 2 FLOP).
The fastest correct shape of each table is what `_logits_core.TUNED` should name; validate_on_gpu.py
then writes KERNELS.md with it.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path

import torch
import triton

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from launchers.sglang.kernels._logits_core import LogitsConfig, default_config  # noqa: E402
from launchers.sglang_gpu_checks import kernel_bench as kb  # noqa: E402
from launchers.sglang_gpu_checks import kernel_checks as kc  # noqa: E402

BASE_DECODE = default_config("bf16", False)
BASE_PREFILL = default_config("bf16", True)
DECODE = {
    "tuned": BASE_DECODE,
    "prefetch 2": dataclasses.replace(BASE_DECODE, prefetch_pages=2),
    "prefetch 4": dataclasses.replace(BASE_DECODE, prefetch_pages=4),
    "tma": dataclasses.replace(BASE_DECODE, keys_tma=True),
    "tma prefetch 4": dataclasses.replace(BASE_DECODE, keys_tma=True, prefetch_pages=4),
    "3 stages prefetch 4": dataclasses.replace(BASE_DECODE, num_stages=3, prefetch_pages=4),
    "8/SM prefetch 2": dataclasses.replace(BASE_DECODE, programs_per_sm=8, prefetch_pages=2),
    "2/SM prefetch 8": dataclasses.replace(BASE_DECODE, programs_per_sm=2, prefetch_pages=8),
}
PREFILL = {
    "tuned": BASE_PREFILL,
    "4 stages": dataclasses.replace(BASE_PREFILL, num_stages=4),
    "tma": dataclasses.replace(BASE_PREFILL, keys_tma=True),
    "tma 4 stages": dataclasses.replace(BASE_PREFILL, keys_tma=True, num_stages=4),
    "tma 2 stages": dataclasses.replace(BASE_PREFILL, keys_tma=True, num_stages=2),
    "tma 4 warps bq2": dataclasses.replace(BASE_PREFILL, keys_tma=True, num_warps=4, block_q=2),
    "tma 4 warps bq4": dataclasses.replace(BASE_PREFILL, keys_tma=True, num_warps=4),
    "tma 8 warps bq8": dataclasses.replace(BASE_PREFILL, keys_tma=True, block_q=8),
}
FULL = {
    "decode_points": [(131072, 1), (262144, 1), (524288, 1), (131072, 4), (16384, 1), (4096, 1),
                      (65536, 16), (131072, 64)],
    "prefill_tokens": [22528, 65536, 131072],
    "check": ([1000, 4096 + 17, 130, 64, 20000], (4096, 256)),
    "copy_bytes": 2 << 30,
}  # fmt: skip
QUICK = {
    "decode_points": [(512, 1)],
    "prefill_tokens": [256],
    "check": ([300, 77], (300, 8)),
    "copy_bytes": 1 << 20,
}
BF16_PEAK_TFLOPS = (
    790.0  # dense bf16 measured on an H200 of this workplace (device KINDS.md); leads elsewhere
)


def check(cfg: LogitsConfig, ragged: bool, sizes: dict, device: torch.device) -> str:
    lengths, (context, rows) = sizes["check"]
    if ragged:
        c = kc.check_ragged("bf16", context, rows, kb.HEADS, (64, 512), 61, device, cfg)
    else:
        c = kc.check_paged("bf16", lengths, kb.HEADS, (64, 512), 62, device, cfg)
    ok = c.all_written and c.rel_err_vs_stored <= 1e-4
    return f"{'ok' if ok else 'WRONG'} err {c.rel_err_vs_stored:.1e} top512 {c.topk_overlap[512]:.4f}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", type=Path)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args(argv)
    device = torch.device("cuda")
    sizes = QUICK if args.quick else FULL
    result: dict = {"device": torch.cuda.get_device_name(device), "torch": torch.__version__,
                    "triton": triton.__version__}  # fmt: skip
    copy = kb.copy_bandwidth_gbs(device, sizes["copy_bytes"])
    result["copy_gbs"] = copy
    peak = result["bf16_matmul_tflops"] = kb.bf16_matmul_tflops(device)
    print(f"bf16 matmul 8192^3 (cuBLAS): {peak:.0f} TFLOP/s")
    print(f"{result['device']}, torch {torch.__version__}, triton {triton.__version__}; copy {copy:.0f} GB/s")
    result["launch_us"] = {
        f"{programs} programs{' pdl' if pdl else ''}": kb.launch_overhead_us(programs, pdl, device)
        for programs in (512, 132) for pdl in (False, True)
    }  # fmt: skip
    for name, us in result["launch_us"].items():
        print(f"empty kernel, {name}: {us:.2f} us per call")

    pages = kb.decode_pool_pages(max(k * b for k, b in sizes["decode_points"]), device)
    pool = kb.random_pool("bf16", pages, device, 3)
    result["decode"] = {}
    print(
        "\n| decode candidate | check | " + " | ".join(f"{k}x{b}" for k, b in sizes["decode_points"]) + " |"
    )
    print("|---|---|" + "---|" * len(sizes["decode_points"]))
    for name, cfg in DECODE.items():
        try:
            verdict = check(cfg, False, sizes, device)
            cells = []
            for keys, batch in sizes["decode_points"]:
                t = kb.time_decode("bf16", pool, keys, batch, cfg, device)
                cells.append({"keys": keys, "batch": batch, "us": t.ms * 1e3, "pct": t.gbs / copy * 100})
        except Exception as error:  # a shape that fails to build here is reported, not fatal
            print(f"| {name} | {type(error).__name__}: {str(error).splitlines()[0][:200]} |")
            continue
        result["decode"][name] = {"check": verdict, "cells": cells}
        row = " | ".join(f"{c['us']:.1f} us {c['pct']:.0f}%" for c in cells)
        print(f"| {name} | {verdict} | {row} |", flush=True)
    del pool
    torch.cuda.empty_cache()

    result["prefill"] = {name: {"cells": []} for name in PREFILL}
    for name, cfg in PREFILL.items():
        try:
            result["prefill"][name]["check"] = check(cfg, True, sizes, device)
        except Exception as error:  # a shape that fails to build here is reported, not fatal
            result["prefill"][name]["check"] = f"{type(error).__name__}: {str(error).splitlines()[0][:200]}"
    for tokens in sizes["prefill_tokens"]:  # one size at a time: its inputs are built once
        for name, cfg in PREFILL.items():
            if not result["prefill"][name]["check"].startswith("ok"):
                continue
            ms = kb.measure_prefill_kernel("bf16", tokens, cfg, device, 11).ms
            tflops = kb.prefill_flops(tokens) / ms / 1e9
            result["prefill"][name]["cells"].append({"tokens": tokens, "ms": ms, "tflops": tflops})
        torch.cuda.empty_cache()
    print(
        "\n| prefill candidate | check | " + " | ".join(f"{t} tokens" for t in sizes["prefill_tokens"]) + " |"
    )
    print("|---|---|" + "---|" * len(sizes["prefill_tokens"]))
    for name, entry in result["prefill"].items():
        row = " | ".join(
            f"{c['ms']:.3f} ms, {c['tflops']:.0f} TFLOP/s, {c['tflops'] / peak:.0%} of peak"
            for c in entry["cells"]
        )
        print(f"| {name} | {entry['check']} | {row} |")
    if args.json:
        args.json.write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
