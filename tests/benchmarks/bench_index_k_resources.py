"""Registers, shared memory and resident programs per SM of the decode index-K kernel, for sm_90, no GPU.

    python tests/benchmarks/bench_index_k_resources.py            # the tuned decode shapes and the sweep's candidates

Compiles `index_logits_kernel` for Hopper (sm_90) with the installed Triton (no GPU needed: Triton's own
ptxas and cuobjdump) and prints, per launch shape, registers per thread, shared memory per program, and how
many programs fit on one SM by registers (65,536 per SM, allocated per warp in units of 256) and by shared
memory (228 KiB, 1 KiB reserved per program). Why it matters: with PDL, the next call's programs can start
(and prefetch) only in the room the running call leaves, so a grid of `programs_per_sm` that fills the SM
by registers overlaps nothing. Triton versions differ: run it with the device's Triton.
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from launchers.sglang.kernels._logits_core import LogitsConfig, default_config, index_logits_kernel  # noqa: E402
from launchers.sglang.kernels.layout import HEAD_DIM, INDEX_PAGE_SIZE  # noqa: E402
from launchers.sglang_gpu_checks.validate_on_gpu import BF16_DECODE_EXTRA  # noqa: E402

POINTERS = {
    "q_ptr": "*fp8e4nv", "w_ptr": "*fp32", "pool_u8": "*u8", "pool_f32": "*fp32", "pool_bf16": "*bf16",
    "page_table_ptr": "*i32", "seq_lens_ptr": "*i32", "cu_q_ptr": "*i32", "out_ptr": "*fp32",
    "page_table_stride": "i32", "out_stride": "i32", "pages_per_split": "i32",
}  # fmt: skip
REGS_PER_SM, SMEM_PER_SM = 65536, 228 * 1024


def resources(kind: str, cfg: LogitsConfig) -> tuple[int, int]:
    """(registers per thread, shared bytes per program) of the decode kernel under `cfg`, for sm_90."""
    fp8 = kind == "fp8"
    page_bytes = INDEX_PAGE_SIZE * (HEAD_DIM + 4) if fp8 else INDEX_PAGE_SIZE * HEAD_DIM * 2
    const = {
        "k_desc": None, "H": 64, "D": HEAD_DIM, "PAGE_SIZE": INDEX_PAGE_SIZE, "BLOCK_Q": 1,
        "PAGES_PER_ITER": cfg.pages_per_iter, "BK": cfg.pages_per_iter * INDEX_PAGE_SIZE,
        "KEYS_AS_ROWS": cfg.keys_as_rows, "KIND_FP8": fp8, "RAGGED": False, "FP8_DOT": fp8, "FP32_DOT": False,
        "NUM_STAGES": cfg.num_stages, "PDL": cfg.pdl, "STREAM_KEYS": cfg.stream_keys,
        "PREFETCH_PAGES": cfg.prefetch_pages, "KEYS_TMA": False, "PAGE_BYTES": page_bytes,
        "PF_LINES": triton.next_power_of_2(triton.cdiv(page_bytes, 128)),
    }  # fmt: skip
    names = index_logits_kernel.arg_names
    signature = {n: POINTERS.get(n, "constexpr") for n in names}
    source = ASTSource(index_logits_kernel, signature, {(names.index(n),): v for n, v in const.items()})
    options = {"num_warps": cfg.num_warps, "num_stages": cfg.num_stages}
    compiled = triton.compile(source, target=GPUTarget("cuda", 90, 32), options=options)
    with tempfile.NamedTemporaryFile("wb", suffix=".cubin", delete=False) as cubin:
        cubin.write(compiled.asm["cubin"])
    cuobjdump = os.path.join(os.path.dirname(triton.__file__), "backends/nvidia/bin/cuobjdump")
    usage = subprocess.run([cuobjdump, "-res-usage", cubin.name], capture_output=True, text=True, check=True)
    os.unlink(cubin.name)
    regs = next(int(w.split(":")[1]) for w in usage.stdout.split() if w.startswith("REG:"))
    return regs, compiled.metadata.shared


def main() -> int:
    shapes = [("bf16", default_config("bf16", False)), ("fp8", default_config("fp8", False))]
    shapes += [("bf16", cfg) for cfg in BF16_DECODE_EXTRA]
    print(f"triton {triton.__version__}, sm_90, decode kernel (one query row per program)\n")
    print("| kind | warps | stages | pages/iter | programs/SM asked | prefetch pages | regs/thread | shared B | "
          "programs/SM by regs | by shared memory |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|---|---|")
    for kind, cfg in shapes:
        regs, shared = resources(
            kind, dataclasses.replace(cfg, large_call_stages=None, large_call_max_pages=None)
        )
        per_program_regs = triton.cdiv(regs * 32, 256) * 256 * cfg.num_warps
        print(
            f"| {kind} | {cfg.num_warps} | {cfg.num_stages} | {cfg.pages_per_iter} | {cfg.programs_per_sm} | "
            f"{cfg.prefetch_pages} | {regs} | {shared} | {REGS_PER_SM // per_program_regs} | "
            f"{SMEM_PER_SM // (shared + 1024)} |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
