"""Do SGLang 0.5.23's JIT CUDA kernels build on this machine, and do the `--sglang` stand-ins match them?

    python tests/benchmarks/sglang_jit_probe.py

`launchers.sglang_gpu_checks.sglang_validate` stands in for two JIT kernels SGLang has no torch path for (the C4
indexer's fused q kernel, and the compressor's fp8 fused store). This builds each with SGLang's own
`load_jit` (nvcc + tvm-ffi), runs it on random inputs and compares it with its stand-in: q as fp8 values
and folded weights, the store byte for byte. One line per kernel; exit 0 even where a build fails (it
reports why), since the point is to learn what this machine can build.
"""

from __future__ import annotations

import time
import traceback

import torch


def probe_q(device: torch.device) -> str:
    from sglang.kernels.ops.attention.dsv4.norm_rope import fused_q_indexer_rope_hadamard_quant

    from launchers.sglang_gpu_checks.sglang_harness import fused_q_standin

    gen = torch.Generator(device=device).manual_seed(1)
    rows, heads = 777, 64
    q = torch.randn(rows, heads, 128, generator=gen, device=device).bfloat16()
    w = torch.randn(rows, heads, generator=gen, device=device).bfloat16()
    angles = torch.rand(4096, 32, generator=gen, device=device) * 6.2832
    freqs = torch.polar(torch.ones_like(angles), angles)
    pos = torch.randint(0, 4096, (rows,), generator=gen, device=device)
    began = time.perf_counter()
    q8, wt = fused_q_indexer_rope_hadamard_quant(q, w, 0.0123, freqs, pos)
    torch.cuda.synchronize()
    built = time.perf_counter() - began
    s8, sw = fused_q_standin(q, w, 0.0123, freqs, pos)
    real = q8.float() * wt  # dequantized-and-weighted, comparable despite fp8 rounding
    ours = s8.float() * sw
    q_err = ((real - ours).abs().max() / real.abs().max()).item()
    w_err = ((wt - sw).abs().max() / wt.abs().max()).item()
    same = (q8.view(torch.uint8) == s8.view(torch.uint8)).float().mean().item()
    return (
        f"fused_q_indexer_rope_hadamard_quant: built+ran in {built:.1f} s; stand-in: fp8 bytes equal {same:.4f}, "
        f"weights rel err {w_err:.2e}, weighted q rel err {q_err:.2e}"
    )


def probe_store(device: torch.device) -> str:
    from sglang.kernels.ops.attention.dsv4 import compress
    from sglang.srt.layers.attention.dsv4 import compressor_v2

    from launchers.sglang.kernels.layout import new_pool
    from launchers.sglang.kernels.store import norm_rope_hadamard_store

    gen = torch.Generator(device=device).manual_seed(2)
    rows, pages = 3000, 100
    kv = (torch.randn(rows, 128, generator=gen, device=device) * 2).bfloat16()
    norm_w = torch.rand(128, generator=gen, device=device) + 0.5
    angles = torch.rand(1 << 16, 32, generator=gen, device=device) * 6.2832
    freqs = torch.polar(torch.ones_like(angles), angles)
    words = torch.zeros(rows, 4, dtype=torch.int32, device=device)
    words[:, 0] = torch.randint(1, 1 << 14, (rows,), generator=gen, device=device) * 4
    words[:, 1] = torch.arange(rows, device=device, dtype=torch.int32)
    out_loc = torch.randperm(pages * 64, device=device)[:rows]
    plan = compress.CompressorPrefillPlan(
        4, words.view(torch.uint8).view(rows, 16), torch.zeros(rows, 8, dtype=torch.uint8, device=device)
    )
    real = new_pool(pages, "fp8", device).fill_(0xFF)
    began = time.perf_counter()
    compressor_v2.compress_norm_rope_store(
        kv, plan, norm_weight=norm_w, norm_eps=1e-6, freq_cis=freqs, out_loc=out_loc, kvcache=real,
        page_size=64, use_fp4=False, bf16_store=False,
    )  # fmt: skip
    torch.cuda.synchronize()
    built = time.perf_counter() - began
    ours = new_pool(pages, "fp8", device).fill_(0xFF)
    norm_rope_hadamard_store(
        kv, plan[1], is_decode=False, compress_ratio=4, norm_weight=norm_w.bfloat16(), eps=1e-6,
        freqs_real=torch.view_as_real(freqs).flatten(-2).float(), out_loc=out_loc, pool=ours,
    )  # fmt: skip
    same = (real == ours).float().mean().item()
    return f"compress_norm_rope_store (fp8, fused_norm_rope_v2): built+ran in {built:.1f} s; stand-in bytes equal {same:.6f}"


def main() -> int:
    device = torch.device("cuda")
    for probe in (probe_q, probe_store):
        try:
            print(probe(device), flush=True)
        except Exception as error:  # report, keep going: this is a probe
            print(f"{probe.__name__}: FAILED {type(error).__name__}: {str(error).splitlines()[0][:300]}")
            traceback.print_exc()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
