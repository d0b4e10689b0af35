"""fp8 e4m3 quantization with one fp32 scale per row, as SGLang 0.5.23 stores indexer rows.

SGLang's CUDA store for the indexer's keys (jit_kernel csrc deepseek_v4/store.cuh,
`fused_store_indexer_cache`) and its fused q kernel (deepseek_v4/main_norm_rope.cuh,
`fused_q_indexer_rope_hadamard_quant`) both compute, per 128-element row,
    scale = max(1e-4, amax(|x|)) / 448,   fp8 = e4m3(clamp(x / scale, -448, 448))
(they multiply by 1/scale; the cast rounds to nearest even), and store `scale` as plain fp32.
"""

from __future__ import annotations

import torch

FP8_E4M3_MAX = 448.0
MIN_AMAX = 1e-4  # floor on amax: an all-zero row gets a tiny scale instead of a division by zero


def quantize_rows_e4m3(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """x (..., D) -> (float8_e4m3fn (..., D), fp32 scale (...)), one scale per row."""
    xf = x.float()
    amax = xf.abs().amax(dim=-1).clamp_min(MIN_AMAX)
    scale = amax / FP8_E4M3_MAX
    inv_scale = 1.0 / scale
    q = (xf * inv_scale.unsqueeze(-1)).clamp(-FP8_E4M3_MAX, FP8_E4M3_MAX).to(torch.float8_e4m3fn)
    return q, scale


def dequantize_rows_e4m3(q: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    """Inverse of quantize_rows_e4m3 (up to fp8 rounding), in fp32."""
    return q.float() * scale.unsqueeze(-1)
