"""Build, check and time the bf16 (and fp8) index-K kernels in one run; print a table; write KERNELS.md.

    python -m launchers.sglang_gpu_checks.validate_on_gpu --md launchers/sglang/KERNELS.md --json out.json
    TRITON_INTERPRET=1 python -m launchers.sglang_gpu_checks.validate_on_gpu --quick     # CPU dry run, tiny sizes
    python -m launchers.sglang_gpu_checks.validate_on_gpu --sglang --md integration.md   # inside SGLang 0.5.23 (sglang_validate.py)

Sections: correctness on fresh random inputs with NaN-poisoned outputs (max relative error against fp64
math on the fp32 keys, top-k overlap with the exact top-k at index_topk 512 and 1024); a launch-shape
sweep; decode time and bandwidth against the copy bandwidth measured in the same run; prefill time and
peak memory of the on-the-fly kernel against the gather path. Targets are checked and printed last.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import platform
import sys
import time
from pathlib import Path

import torch
import triton

from launchers.sglang.kernels._logits_core import LogitsConfig, default_config
from launchers.sglang.kernels.layout import IndexKDtype
from launchers.sglang_gpu_checks import kernel_bench as kb
from launchers.sglang_gpu_checks import kernel_checks as kc
from launchers.sglang_gpu_checks.validate_report import fmt_cfg, render, targets

KINDS: tuple[IndexKDtype, ...] = ("bf16", "fp8")
FULL = {
    "copy_bytes": 4 << 30,
    "paged_lengths": [4096, 9000, 16384, 32768, 50000, 65536, 131072, 131072 - 37],
    "ragged": (32768, 1024),
    "store_rows": 100_000,
    "topks": (512, 1024),
    "decode_keys": [4096, 16384, 65536, 131072, 262144, 524288, 1048576],
    "decode_batches": [1, 4, 16, 64],
    # decode sweep: batch 1-4 from 128K keys (the short calls), plus mid and large calls as guards
    "sweep_points": [
        (131072, 1),
        (131072, 4),
        (262144, 1),
        (262144, 4),
        (524288, 1),
        (524288, 4),
        (16384, 16),
        (65536, 16),
        (262144, 64),
    ],
    "candidate_check": ([1000, 4096 + 17, 130, 64], (2048, 64)),
    "prefill_tokens": [22528, 65536, 131072],
    "short_call_points": [(131072, 1), (262144, 1), (131072, 4)],
}
QUICK = {
    "copy_bytes": 1 << 20,
    "paged_lengths": [300, 700, 77],
    "ragged": (600, 6),
    "store_rows": 100,
    "topks": (64, 128),
    "decode_keys": [128, 512],
    "decode_batches": [1, 2],
    "sweep_points": [(512, 1), (128, 2)],
    "candidate_check": ([300, 77], (300, 8)),
    "prefill_tokens": [256],
    "short_call_points": [(512, 1)],
}
# The tuned shapes (_logits_core.TUNED, their large-call rule included) against the variants still in
# question; the shapes earlier sweeps ruled out are in KERNELS.md's history, not re-timed.
_BF16_DECODE, _FP8_DECODE = default_config("bf16", False), default_config("fp8", False)
_BF16_PREFILL, _FP8_PREFILL = default_config("bf16", True), default_config("fp8", True)
DECODE_CANDIDATES = [
    dataclasses.replace(_BF16_DECODE, prefetch_pages=0),
    dataclasses.replace(_BF16_DECODE, prefetch_pages=4),
    dataclasses.replace(_BF16_DECODE, prefetch_pages=4, keys_tma=True),
    dataclasses.replace(_FP8_DECODE, prefetch_pages=0),
    dataclasses.replace(_FP8_DECODE, prefetch_pages=4),
]
# bf16 decode only (issue 38: 128K keys x 1 at >= 80% of copy): fewer, fatter programs, so that with PDL
# the next call's programs fit beside the running ones (2 or 1 per SM, not 4) and their L2 prefetch of
# their own pages runs while the previous call streams; and the same grids without the prefetch
BF16_DECODE_EXTRA = [
    dataclasses.replace(_BF16_DECODE, programs_per_sm=2),
    dataclasses.replace(_BF16_DECODE, programs_per_sm=2, prefetch_pages=4),
    dataclasses.replace(_BF16_DECODE, programs_per_sm=2, prefetch_pages=8),
    dataclasses.replace(_BF16_DECODE, programs_per_sm=1, prefetch_pages=16),
]
RAGGED_CANDIDATES = [
    dataclasses.replace(_BF16_PREFILL, keys_tma=False),
    dataclasses.replace(_BF16_PREFILL, keys_tma=True),
    dataclasses.replace(_BF16_PREFILL, keys_tma=True, num_stages=4),
    dataclasses.replace(_BF16_PREFILL, keys_tma=True, num_stages=2),
    dataclasses.replace(_BF16_PREFILL, keys_tma=True, num_warps=4, block_q=2),
    dataclasses.replace(_BF16_PREFILL, keys_tma=True, block_q=8),
    dataclasses.replace(_BF16_PREFILL, keys_tma=False, num_stages=4),
    dataclasses.replace(_BF16_PREFILL, keys_tma=False, num_stages=2),
    _FP8_PREFILL,
]


def correctness(
    sizes: dict, configs: dict, device: torch.device
) -> tuple[list[kc.StoreCheck], list[kc.LogitsCheck]]:
    stores, logits = [], []
    for i, kind in enumerate(KINDS):
        stores.append(kc.check_store(kind, sizes["store_rows"], 10 + i, device))
        fused_rows = min(sizes["store_rows"], 30_000)  # prefill plan rows address out_loc by a u16 id
        stores.append(kc.check_fused_store(kind, fused_rows, False, 20 + i, device))
        stores.append(kc.check_fused_store(kind, fused_rows, True, 30 + i, device))
        paged_cfg, ragged_cfg = configs[kind, False], configs[kind, True]
        logits.append(
            kc.check_paged(kind, sizes["paged_lengths"], kb.HEADS, sizes["topks"], 40 + i, device, paged_cfg)
        )
        context, rows = sizes["ragged"]
        logits.append(
            kc.check_ragged(kind, context, rows, kb.HEADS, sizes["topks"], 50 + i, device, ragged_cfg)
        )
    return stores, logits


def _candidate_ok(
    kind: IndexKDtype, cfg: LogitsConfig, ragged: bool, sizes: dict, device: torch.device
) -> str | None:
    """None if this launch shape computes the right logits on fresh inputs, else why not."""
    limit = 1e-4 if kind == "bf16" else 2e-2
    lengths, (context, rows) = sizes["candidate_check"]
    if ragged:
        check = kc.check_ragged(kind, context, rows, kb.HEADS, (64,), 60, device, cfg)
    else:
        check = kc.check_paged(kind, lengths, kb.HEADS, (64,), 61, device, cfg)
    if not check.all_written or check.rel_err_vs_stored > limit:
        return f"wrong results (written={check.all_written}, err={check.rel_err_vs_stored:.1e})"
    return None


def sweep(sizes: dict, pools: dict, device: torch.device) -> tuple[dict, list[str]]:
    """Check every candidate launch shape, time the correct ones, keep the fastest per (kind, path).
    Decode scores a shape by its mean over the sweep points of time / fastest time at that point, so
    a short call counts as much as a long one."""
    lines, best = [], {}
    for kind in KINDS:
        decode_candidates = DECODE_CANDIDATES + (BF16_DECODE_EXTRA if kind == "bf16" else [])
        for ragged, candidates in ((False, decode_candidates), (True, RAGGED_CANDIDATES)):
            times: dict[LogitsConfig, list[float]] = {}
            problems: dict[LogitsConfig, str] = {}
            for cfg in candidates:
                try:
                    problem = _candidate_ok(kind, cfg, ragged, sizes, device)
                    if problem is not None:
                        problems[cfg] = problem
                    elif ragged:
                        tokens = sizes["prefill_tokens"][0]
                        times[cfg] = [kb.measure_prefill_kernel(kind, tokens, cfg, device, 7).ms]
                    else:
                        times[cfg] = [
                            kb.time_decode(kind, pools[kind], k, b, cfg, device).ms
                            for k, b in sizes["sweep_points"]
                        ]
                except Exception as error:  # a shape that does not compile here is reported and skipped
                    first = str(error).splitlines()[0][:160] if str(error) else ""
                    problems[cfg] = f"{type(error).__name__}: {first}"
            if not times:
                raise RuntimeError(f"no launch shape works for {kind} {'prefill' if ragged else 'decode'}")
            fastest = [min(t[i] for t in times.values()) for i in range(len(next(iter(times.values()))))]
            score = {
                cfg: sum(x / f for x, f in zip(t, fastest, strict=True)) / len(t) for cfg, t in times.items()
            }
            for cfg in candidates:
                label = f"{'prefill' if ragged else 'decode'} {kind} {fmt_cfg(cfg, ragged)}"
                if cfg in problems:
                    lines.append(f"{label}: {problems[cfg]}")
                elif ragged:
                    lines.append(f"{label}: {times[cfg][0]:.4f} ms")
                else:
                    each = " / ".join(f"{x:.4f}" for x in times[cfg])
                    lines.append(f"{label}: {score[cfg]:.3f} x fastest ({each} ms)")
            best[kind, ragged] = min(score, key=score.get)
    return best, lines


def short_calls(sizes: dict, pool: torch.Tensor, chosen: LogitsConfig, device: torch.device) -> list[dict]:
    """bf16 decode calls of one to a few requests, where launch and ramp weigh most: the chosen shape,
    without PDL and without the L2 prefetch, the chosen at 256 MiB per graph replay, the read-only floor
    of that grid, the launch overhead (an empty kernel of the same grid, timed the same way) and a
    device-to-device copy moving the call's bytes, timed the same way."""
    plain = dataclasses.replace(chosen, pdl=False, prefetch_pages=0)
    pdl = dataclasses.replace(chosen, pdl=True, prefetch_pages=0)
    rows = []
    for keys, batch in sizes["short_call_points"]:
        timings = {
            "floor": kb.time_read_floor(pool, keys, batch, plain, device),
            "plain": kb.time_decode("bf16", pool, keys, batch, plain, device),
            "pdl": kb.time_decode("bf16", pool, keys, batch, pdl, device),
            "chosen": kb.time_decode("bf16", pool, keys, batch, chosen, device),
            "chosen_256mib": kb.time_decode("bf16", pool, keys, batch, chosen, device, 256 << 20),
        }
        moved = timings["chosen"].gbs * timings["chosen"].ms * 1e6
        timings["same_size_copy"] = kb.time_same_size_copy(int(moved), device)
        programs = kb.decode_programs(keys, batch, chosen, device)
        rows.append(
            {"keys": keys, "batch": batch, "programs": programs}
            | {k: {"ms": t.ms, "gbs": t.gbs} for k, t in timings.items()}
            | {"empty_us": kb.launch_overhead_us(programs, chosen.pdl, device)}
        )
    return rows


def run(quick: bool) -> dict:
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    sizes = QUICK if quick else FULL
    result: dict = {
        "device": torch.cuda.get_device_name(device)
        if device.type == "cuda"
        else f"CPU ({platform.processor()})",
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "torch": torch.__version__,
        "triton": triton.__version__,
        "python": platform.python_version(),
        "topks": list(sizes["topks"]),
        "sweep_points": [list(p) for p in sizes["sweep_points"]],
        "prefill_tokens": list(sizes["prefill_tokens"]),
    }
    started = time.perf_counter()

    def progress(what: str) -> None:
        print(f"[{time.perf_counter() - started:6.1f} s] {what}", flush=True)

    progress(f"device {result['device']}")
    result["copy_gbs"] = kb.copy_bandwidth_gbs(device, sizes["copy_bytes"])
    result["bf16_tflops"] = kb.bf16_matmul_tflops(device)
    progress(f"copy bandwidth {result['copy_gbs']:.0f} GB/s, bf16 matmul {result['bf16_tflops']:.0f} TFLOP/s")
    pages = kb.decode_pool_pages(max(sizes["decode_keys"]) * max(sizes["decode_batches"]), device)
    pools = {kind: kb.random_pool(kind, pages, device, 3) for kind in KINDS}
    best, lines = sweep(sizes, pools, device)
    result["sweep"] = lines
    result["decode_config"] = {kind: best[kind, False] for kind in KINDS}
    result["ragged_config"] = {kind: best[kind, True] for kind in KINDS}
    progress("sweep done:\n" + "\n".join(lines))
    stores, logits = correctness(sizes, best, device)
    result["store_checks"] = [dataclasses.asdict(s) for s in stores]
    result["logits_checks"] = [
        {**dataclasses.asdict(c), "topk_overlap": {str(k): v for k, v in c.topk_overlap.items()},
         "topk_overlap_min": {str(k): v for k, v in c.topk_overlap_min.items()}}
        for c in logits
    ]  # fmt: skip
    progress("correctness done")
    result["decode"] = []
    for keys in sizes["decode_keys"]:
        for batch in sizes["decode_batches"]:
            row = {"keys": keys, "batch": batch}
            for kind in KINDS:
                t = kb.time_decode(kind, pools[kind], keys, batch, best[kind, False], device)
                row[kind] = {"ms": t.ms, "gbs": t.gbs, "ns_per_key": t.ns_per_key}
            result["decode"].append(row)
    result["short_calls"] = short_calls(sizes, pools["bf16"], best["bf16", False], device)
    del pools
    progress("decode table done")
    result["prefill"] = []
    for tokens in sizes["prefill_tokens"]:
        for kind in KINDS:
            result["prefill"].append(
                dataclasses.asdict(kb.measure_prefill_kernel(kind, tokens, best[kind, True], device, 11))
            )
            torch.cuda.empty_cache() if device.type == "cuda" else None
        result["prefill"].append(dataclasses.asdict(kb.measure_prefill_gather(tokens, device, 11)))
        torch.cuda.empty_cache() if device.type == "cuda" else None
    progress("prefill done")
    result["targets"] = targets(result)
    return result


ANCHOR_HEADING = "## Anchor: "


def _kept_anchor(md: Path) -> str:
    """The DeepGEMM anchor section of an existing report (bench_deepgemm_anchor.py writes it, needing
    deep_gemm), kept when this script rewrites the rest."""
    old = md.read_text() if md.exists() else ""
    at = old.find("\n" + ANCHOR_HEADING)
    return old[at:] if at >= 0 else ""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="tiny sizes (the CPU interpreter dry run)")
    parser.add_argument("--md", type=Path, help="write the markdown report here")
    parser.add_argument("--json", type=Path, help="write every number here")
    parser.add_argument(
        "--sglang",
        action="store_true",
        help="run the patch inside SGLang 0.5.23's own DeepSeek-V4 pool, configurator, compressor store and "
        "indexer (needs sglang==0.5.23 importable); one table, exit 1 on any mismatch",
    )
    parser.add_argument(
        "--jit", action="store_true", help="with --sglang: build SGLang's JIT CUDA kernels (nvcc, tvm-ffi)"
    )
    parser.add_argument(
        "--from-json", type=Path, help="re-render a run's --json (no GPU) instead of measuring; with --md"
    )
    args = parser.parse_args(argv)
    if args.sglang:
        return _sglang_main(args)
    result = _from_json(args.from_json) if args.from_json else run(args.quick)
    text = render(result)
    print(text)
    if args.md:
        args.md.write_text(text + _kept_anchor(args.md))
    if args.json:
        serial = {
            **result,
            "decode_config": {k: dataclasses.asdict(v) for k, v in result["decode_config"].items()},
            "ragged_config": {k: dataclasses.asdict(v) for k, v in result["ragged_config"].items()},
        }
        args.json.write_text(json.dumps(serial, indent=1))
    return 0 if all(ok for ok, _ in result["targets"]) else 1


def _from_json(path: Path) -> dict:
    """A run's result as `run` returned it, read back from its --json (configs become LogitsConfig again)."""
    result = json.loads(path.read_text())
    for key in ("decode_config", "ragged_config"):
        result[key] = {kind: LogitsConfig(**cfg) for kind, cfg in result[key].items()}
    result["targets"] = targets(result)
    return result


def _sglang_main(args: argparse.Namespace) -> int:
    from launchers.sglang.refusal import PatchRefused
    from launchers.sglang_gpu_checks import sglang_validate

    try:
        result = sglang_validate.run(quick=args.quick, jit=args.jit)
    except ModuleNotFoundError as missing:
        if not (missing.name or "").startswith("sglang"):
            raise
        print(
            f"validate_on_gpu --sglang: {missing.name} is not importable here; install sglang==0.5.23 "
            "(pip install --no-deps sglang==0.5.23 and its Python dependencies) in this environment",
            file=sys.stderr,
        )
        return 2
    except PatchRefused as refused:
        print(refused, file=sys.stderr)
        return 2
    text = sglang_validate.render(result)
    print(text)
    if args.md:
        args.md.write_text(text + "\n")
    if args.json:
        args.json.write_text(json.dumps(sglang_validate.as_json(result), indent=1))
    return 1 if any(check.ok is False for check in result.checks) else 0


if __name__ == "__main__":
    sys.exit(main())
