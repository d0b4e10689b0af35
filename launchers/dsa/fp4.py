"""fp4 index keys as SGLang 0.5.23 stores DeepSeek-V4's c4 indexer keys (`--enable-deepseek-v4-fp4-indexer`).

The quantizer (`sglang/kernels/ops/quantization/fp4_indexer_quant.py`, `quantize_fp4_indexer_tensor`)
takes rows of 128 values in four blocks of 32; per block
    scale = 2^ceil(log2(max(amax / 6, 1e-4)))      (a ue8m0 exponent, clamped to 1..254)
and each value x / scale becomes an e2m1 code (magnitudes 0, .5, 1, 1.5, 2, 3, 4, 6; bit 3 the sign,
never set on a zero). The c4 pool keeps SGLang's *threshold* rounding (`rne=False`: a value exactly
half-way between two magnitudes goes to the smaller one; `DeepSeekV4IndexerPool.index_k_rne = False`);
its CUDA fused store (`fused_norm_rope_indexer_fp4`) and fp4 query kernel use the same thresholds. One
row is 64 bytes of codes (element 2i in the low nibble of byte i) and four exponent bytes.

The cache layout (`sglang/kernels/ops/kvcache/dsv4_fp4_index_k_cache.py`): a page of P slots holds
P x 64 code bytes, then P x 4 exponent bytes (68 bytes per compressed token); SGLang's pages hold 64.
"""

from __future__ import annotations

import torch

E2M1_MAX = 6.0
BLOCK = 32  # values sharing one ue8m0 scale
MIN_SCALE = 1e-4  # floor on amax / 6 (the Triton quantizer's; its CUDA twins floor amax at 1e-4 instead)
HEAD_DIM = 128
CODE_BYTES = HEAD_DIM // 2  # 64
SCALE_BYTES = HEAD_DIM // BLOCK  # 4
SLOT_BYTES = CODE_BYTES + SCALE_BYTES  # 68
PAGE_SLOTS = 64  # compressed tokens per index-K page, as SGLang's DeepSeek-V4 pool pages them

# |x| above each threshold moves one e2m1 magnitude up (strictly above: ties go down)
_THRESHOLDS = (0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0)
_MAGNITUDES = torch.tensor([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0])


def _ceil_ue8m0(x: torch.Tensor) -> torch.Tensor:
    """The biased exponent of 2^ceil(log2(x)) for positive fp32 x, from its IEEE bits, clamped to 1..254."""
    bits = x.contiguous().view(torch.int32)
    exponent = ((bits >> 23) & 0xFF) + ((bits & 0x7FFFFF) != 0).to(torch.int32)
    return exponent.clamp(1, 254)


def _scale_of(exponent: torch.Tensor) -> torch.Tensor:
    """ue8m0 exponents (any int dtype) -> their fp32 powers of two."""
    return (exponent.to(torch.int32) << 23).view(torch.float32)


def quantize_rows_e2m1(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """x (..., 128) -> (codes uint8 (..., 64), ue8m0 exponents uint8 (..., 4)), SGLang's bytes."""
    if x.shape[-1] != HEAD_DIM:
        raise ValueError(f"fp4 index keys are rows of {HEAD_DIM} values, got {x.shape[-1]}")
    blocks = x.float().unflatten(-1, (SCALE_BYTES, BLOCK))
    amax = blocks.abs().amax(dim=-1)
    exponent = _ceil_ue8m0((amax / E2M1_MAX).clamp_min(MIN_SCALE))
    scaled = blocks / _scale_of(exponent).unsqueeze(-1)  # a power of two: exact
    magnitude = scaled.abs().clamp_max(E2M1_MAX)
    index = torch.zeros(magnitude.shape, dtype=torch.uint8, device=x.device)  # on the keys device (GPU eval)
    for threshold in _THRESHOLDS:
        index += (magnitude > threshold).to(torch.uint8)
    sign = ((scaled < 0) & (index != 0)).to(torch.uint8)
    codes = (index | (sign << 3)).flatten(-2)
    packed = codes[..., 0::2] | (codes[..., 1::2] << 4)
    return packed, exponent.to(torch.uint8)


def dequantize_rows_e2m1(codes: torch.Tensor, exponent: torch.Tensor) -> torch.Tensor:
    """Inverse of quantize_rows_e2m1 (exact: every e2m1 value times a power of two is an fp32)."""
    nibbles = torch.stack([codes & 0x0F, codes >> 4], dim=-1).flatten(-2).long()  # (..., 128)
    values = _MAGNITUDES.to(codes.device)[nibbles & 0x7]
    values = torch.where((nibbles & 0x8) != 0, -values, values)
    scale = _scale_of(exponent).repeat_interleave(BLOCK, dim=-1)
    return values * scale


def fake_quantize_e2m1(x: torch.Tensor) -> torch.Tensor:
    """x (..., 128) rounded onto the fp4 grid and back, in fp32."""
    return dequantize_rows_e2m1(*quantize_rows_e2m1(x))


def cache_pages(n_slots: int) -> int:
    """Pages of PAGE_SLOTS slots needed to hold n_slots index keys."""
    return -(-n_slots // PAGE_SLOTS)


def write_slots(
    cache: torch.Tensor, slots: torch.Tensor, codes: torch.Tensor, exponent: torch.Tensor
) -> None:
    """Store rows at slots of a (pages, PAGE_SLOTS * 68) uint8 cache, in SGLang's page layout."""
    page, offset = slots // PAGE_SLOTS, slots % PAGE_SLOTS
    code_cols = offset.unsqueeze(-1) * CODE_BYTES + torch.arange(CODE_BYTES)
    scale_cols = PAGE_SLOTS * CODE_BYTES + offset.unsqueeze(-1) * SCALE_BYTES + torch.arange(SCALE_BYTES)
    cache[page.unsqueeze(-1), code_cols] = codes
    cache[page.unsqueeze(-1), scale_cols] = exponent


def read_slots(cache: torch.Tensor, slots: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(codes (..., 64), exponents (..., 4)) stored at slots: write_slots' inverse."""
    page, offset = slots // PAGE_SLOTS, slots % PAGE_SLOTS
    code_cols = offset.unsqueeze(-1) * CODE_BYTES + torch.arange(CODE_BYTES)
    scale_cols = PAGE_SLOTS * CODE_BYTES + offset.unsqueeze(-1) * SCALE_BYTES + torch.arange(SCALE_BYTES)
    return cache[page.unsqueeze(-1), code_cols], cache[page.unsqueeze(-1), scale_cols]
