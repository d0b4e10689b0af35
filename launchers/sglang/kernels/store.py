"""Triton stores of 128-dim index keys into SGLang 0.5.23's DeepSeek-V4 indexer pages (fp8 or bf16).

Two entry points:
- `store_index_k(k, loc, pool)`: write finished keys at pool slots (the plain store).
- `norm_rope_hadamard_store(...)`: the compressor's whole indexer epilogue, RMSNorm -> RoPE on the last
  64 dims -> 128-point Hadamard -> store, reading SGLang's compressor plan rows, as SGLang's fused
  CUDA kernel `fused_norm_rope_indexer` does for fp8 (which refuses bf16 with a static_assert). The
  patch routes the compressor's indexer store here.
The fp8 layout is byte-for-byte SGLang's: scale = max(amax, 1e-4) / 448, values e4m3(k * (1 / scale)).
"""

from __future__ import annotations

import functools

import torch
import triton
import triton.language as tl

from launchers.sglang.kernels._triton_utils import interpreting, to_bf16, to_e4m3_bits
from launchers.sglang.kernels.layout import HEAD_DIM, INDEX_PAGE_SIZE, as_page_rows, pool_kind
from launchers.sglang.kernels.reference import hadamard_matrix

ROPE_DIM = 64
BLOCK_ROWS = 16  # tl.dot needs at least 16 rows


@triton.jit
def _store_rows(
    pool_u8,
    pool_f32,
    pool_bf16,
    x,
    slot,
    ok,
    KIND_FP8: tl.constexpr,
    PAGE_SIZE: tl.constexpr,
    D: tl.constexpr,
    BIT_EXACT: tl.constexpr,
):
    """Store fp32 rows `x [R, D]` at pool slots `slot [R]` where `ok`."""
    d = tl.arange(0, D)
    page = slot.to(tl.int64) // PAGE_SIZE
    off = slot.to(tl.int64) % PAGE_SIZE
    if KIND_FP8:
        page_bytes = PAGE_SIZE * (D + 4)
        scale = tl.maximum(tl.max(tl.abs(x), axis=1), 1e-4) / 448.0
        codes = to_e4m3_bits(x * (1.0 / scale)[:, None], BIT_EXACT)
        tl.store(pool_u8 + (page * page_bytes + off * D)[:, None] + d[None, :], codes, mask=ok[:, None])
        tl.store(pool_f32 + page * (page_bytes // 4) + (PAGE_SIZE * D) // 4 + off, scale, mask=ok)
    else:
        values = to_bf16(x, BIT_EXACT)
        tl.store(
            pool_bf16 + (page * (PAGE_SIZE * D) + off * D)[:, None] + d[None, :], values, mask=ok[:, None]
        )


@triton.jit(do_not_specialize=["n_rows"])
def _store_kernel(
    k_ptr,
    loc_ptr,
    pool_u8,
    pool_f32,
    pool_bf16,
    n_rows,
    KIND_FP8: tl.constexpr,
    PAGE_SIZE: tl.constexpr,
    D: tl.constexpr,
    BLOCK: tl.constexpr,
    BIT_EXACT: tl.constexpr,
):
    rows = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    in_range = rows < n_rows
    slot = tl.load(loc_ptr + rows, mask=in_range, other=-1).to(tl.int64)
    ok = in_range & (slot >= 0)
    d = tl.arange(0, D)
    x = tl.load(k_ptr + rows.to(tl.int64)[:, None] * D + d[None, :], mask=ok[:, None], other=0.0)
    _store_rows(pool_u8, pool_f32, pool_bf16, x.to(tl.float32), slot, ok, KIND_FP8, PAGE_SIZE, D, BIT_EXACT)


@triton.jit(do_not_specialize=["n_rows", "compress_ratio"])
def _norm_rope_hadamard_store_kernel(
    kv_ptr,
    plan_ptr,
    out_loc_ptr,
    norm_w_ptr,
    freqs_ptr,
    hadamard_ptr,
    pool_u8,
    pool_f32,
    pool_bf16,
    n_rows,
    eps,
    compress_ratio,
    IS_DECODE: tl.constexpr,
    KIND_FP8: tl.constexpr,
    PAGE_SIZE: tl.constexpr,
    D: tl.constexpr,
    ROPE: tl.constexpr,
    BLOCK: tl.constexpr,
    BIT_EXACT: tl.constexpr,
):
    rows = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    in_range = rows < n_rows
    # plan rows are 16 bytes = 4 int32 words: seq_len (u32), then ragged_id (u16) for prefill
    seq_len = tl.load(plan_ptr + rows * 4, mask=in_range, other=-1)
    if IS_DECODE:
        ok = in_range & (seq_len % compress_ratio == 0)
        slot = tl.load(out_loc_ptr + rows, mask=ok, other=0)
    else:
        ok = in_range & (seq_len != -1)
        ragged = tl.load(plan_ptr + rows * 4 + 1, mask=ok, other=0) & 0xFFFF
        slot = tl.load(out_loc_ptr + ragged, mask=ok, other=0)
    position = tl.where(ok, seq_len - compress_ratio, 0)

    d = tl.arange(0, D)
    row_off = rows.to(tl.int64)[:, None] * D
    x = tl.load(kv_ptr + row_off + d[None, :], mask=ok[:, None], other=0.0).to(tl.float32)
    partner = tl.load(kv_ptr + row_off + (d ^ 1)[None, :], mask=ok[:, None], other=0.0).to(tl.float32)
    w = tl.load(norm_w_ptr + d).to(tl.float32)
    w_partner = tl.load(norm_w_ptr + (d ^ 1)).to(tl.float32)
    inv_rms = 1.0 / tl.sqrt(tl.sum(x * x, axis=1) / D + eps)
    x = x * inv_rms[:, None] * w[None, :]
    partner = partner * inv_rms[:, None] * w_partner[None, :]

    # RoPE on the last ROPE dims, interleaved (re, im) pairs: re' = re c - im s, im' = im c + re s
    is_rope = d >= D - ROPE
    freq_col = ((d - (D - ROPE)) // 2) * 2
    rope_mask = ok[:, None] & is_rope[None, :]
    freq_off = position.to(tl.int64)[:, None] * ROPE + freq_col[None, :]
    cos = tl.load(freqs_ptr + freq_off, mask=rope_mask, other=1.0)
    sin = tl.load(freqs_ptr + freq_off + 1, mask=rope_mask, other=0.0)
    sign = tl.where(d % 2 == 0, -1.0, 1.0)
    y = x * cos + sign[None, :] * partner * sin

    h = tl.load(hadamard_ptr + d[:, None] * D + d[None, :])
    z = tl.dot(y, h, input_precision="ieee")
    _store_rows(pool_u8, pool_f32, pool_bf16, z, slot, ok, KIND_FP8, PAGE_SIZE, D, BIT_EXACT)


def _pool_views(pool: torch.Tensor, page_size: int) -> tuple[bool, torch.Tensor, torch.Tensor, torch.Tensor]:
    rows = as_page_rows(pool)
    kind = pool_kind(rows, page_size)
    return kind == "fp8", rows, rows.view(torch.float32), rows.view(torch.bfloat16)


def store_index_k(
    k: torch.Tensor, loc: torch.Tensor, pool: torch.Tensor, page_size: int = INDEX_PAGE_SIZE
) -> None:
    """Write keys `k [N, 128]` (bf16 or fp32) at pool slots `loc [N]` (negative: skipped), fp8 or bf16
    according to the pool's page size."""
    if k.shape[-1] != HEAD_DIM or k.dim() != 2:
        raise ValueError(f"index keys must be [N, {HEAD_DIM}], got {tuple(k.shape)}")
    if k.shape[0] == 0:
        return
    is_fp8, u8, f32, bf16 = _pool_views(pool, page_size)
    grid = (triton.cdiv(k.shape[0], BLOCK_ROWS),)
    _store_kernel[grid](
        k.contiguous(),
        loc.contiguous(),
        u8,
        f32,
        bf16,
        k.shape[0],
        KIND_FP8=is_fp8,
        PAGE_SIZE=page_size,
        D=HEAD_DIM,
        BLOCK=BLOCK_ROWS,
        BIT_EXACT=interpreting(),
    )


@functools.cache
def _hadamard_on(device: torch.device) -> torch.Tensor:
    return hadamard_matrix(HEAD_DIM).float().to(device)


def norm_rope_hadamard_store(
    kv: torch.Tensor,
    plan: torch.Tensor,
    *,
    is_decode: bool,
    compress_ratio: int,
    norm_weight: torch.Tensor,
    eps: float,
    freqs_real: torch.Tensor,
    out_loc: torch.Tensor,
    pool: torch.Tensor,
    page_size: int = INDEX_PAGE_SIZE,
) -> None:
    """The compressor's indexer-key epilogue into the pool: see the module docstring.

    `kv [N, 128]` compressed rows (bf16), `plan uint8 [N, 16]` SGLang's CompressPlan (prefill) or
    DecodePlan (decode) rows, `norm_weight [128]`, `freqs_real fp32 [max_pos, 64]`, `out_loc int64`."""
    if kv.dim() != 2 or kv.shape[-1] != HEAD_DIM:
        raise ValueError(f"compressed index rows must be [N, {HEAD_DIM}], got {tuple(kv.shape)}")
    if plan.shape[0] != kv.shape[0] or plan.shape[-1] != 16 or plan.dtype != torch.uint8:
        raise ValueError(f"plan must be uint8 [{kv.shape[0]}, 16], got {plan.dtype} {tuple(plan.shape)}")
    if freqs_real.shape[-1] != ROPE_DIM or freqs_real.dtype != torch.float32:
        raise ValueError(
            f"freqs must be fp32 [max_pos, {ROPE_DIM}], got {freqs_real.dtype} {tuple(freqs_real.shape)}"
        )
    if kv.shape[0] == 0:
        return
    is_fp8, u8, f32, bf16 = _pool_views(pool, page_size)
    grid = (triton.cdiv(kv.shape[0], BLOCK_ROWS),)
    _norm_rope_hadamard_store_kernel[grid](
        kv.contiguous(),
        plan.contiguous().view(torch.int32),
        out_loc.contiguous(),
        norm_weight.contiguous(),
        freqs_real.contiguous(),
        _hadamard_on(kv.device),
        u8,
        f32,
        bf16,
        kv.shape[0],
        float(eps),
        int(compress_ratio),
        IS_DECODE=bool(is_decode),
        KIND_FP8=is_fp8,
        PAGE_SIZE=page_size,
        D=HEAD_DIM,
        ROPE=ROPE_DIM,
        BLOCK=BLOCK_ROWS,
        BIT_EXACT=interpreting(),
    )
