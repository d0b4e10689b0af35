"""Torch references for the index-K kernels: plain, slow, obviously right, and written against fp32 math.

Each Triton kernel in this package has its reference here and is tested against it (on the CPU through
Triton's interpreter, on the GPU for real). The math is DeepSeek's lightning indexer as SGLang 0.5.23
runs it for DeepSeek-V4:

    logits[t, s] = k_scale[s] * sum_h w[t, h] * ReLU(q[t, h, :] . k[s, :])

with `k_scale` 1 for bf16 keys, and index keys made by the compressor as
`Hadamard(RoPE(RMSNorm(kv)))`, RoPE on the last 64 of the 128 dims as interleaved (re, im) pairs.
"""

from __future__ import annotations

import functools

import torch

from launchers.sglang.kernels.layout import HEAD_DIM, INDEX_PAGE_SIZE, IndexKDtype, as_page_rows, pool_kind

FP8_E4M3_MAX = 448.0
FP8_MIN_AMAX = 1e-4  # SGLang's floor on a row's amax before dividing by 448
ROPE_DIM = 64


def quantize_fp8_rows(k: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """SGLang's indexer fp8 store: scale = max(amax, 1e-4) / 448 (fp32), value = e4m3(k * (1 / scale))."""
    kf = k.float()
    scale = kf.abs().amax(dim=-1).clamp_min(FP8_MIN_AMAX) / FP8_E4M3_MAX
    values = (kf * (1.0 / scale).unsqueeze(-1)).to(torch.float8_e4m3fn)
    return values, scale


def store_keys(
    pool: torch.Tensor, k: torch.Tensor, loc: torch.Tensor, page_size: int = INDEX_PAGE_SIZE
) -> None:
    """Write keys `k [N, 128]` at pool slots `loc [N]` (negative slots are skipped), in the pool's layout."""
    rows = as_page_rows(pool)
    kind = pool_kind(rows, page_size)
    keep = loc >= 0
    k, loc = k[keep], loc[keep].long()
    page, off = loc // page_size, loc % page_size
    if kind == "bf16":
        values = rows.view(torch.bfloat16).view(rows.shape[0], page_size, HEAD_DIM)
        values[page, off] = k.to(torch.bfloat16)
        return
    fp8, scale = quantize_fp8_rows(k)
    values = rows[:, : page_size * HEAD_DIM].view(rows.shape[0], page_size, HEAD_DIM)
    values[page, off] = fp8.view(torch.uint8)
    scales = rows[:, page_size * HEAD_DIM :].view(torch.float32)
    scales[page, off] = scale


def load_keys(pool: torch.Tensor, loc: torch.Tensor, page_size: int = INDEX_PAGE_SIZE) -> torch.Tensor:
    """Keys at pool slots `loc`, dequantized to fp32 `[N, 128]` (fp8 values times their scale)."""
    rows = as_page_rows(pool)
    kind = pool_kind(rows, page_size)
    loc = loc.long()
    page, off = loc // page_size, loc % page_size
    if kind == "bf16":
        return rows.view(torch.bfloat16).view(rows.shape[0], page_size, HEAD_DIM)[page, off].float()
    values = rows[:, : page_size * HEAD_DIM].view(rows.shape[0], page_size, HEAD_DIM)[page, off]
    scales = rows[:, page_size * HEAD_DIM :].view(torch.float32)[page, off]
    return values.view(torch.float8_e4m3fn).float() * scales.unsqueeze(-1)


def stored_precision(k: torch.Tensor, kind: IndexKDtype) -> torch.Tensor:
    """What a key reads back as after a store in `kind`, in fp32 (the rounding the pool applies)."""
    if kind == "bf16":
        return k.to(torch.bfloat16).float()
    values, scale = quantize_fp8_rows(k)
    return values.float() * scale.unsqueeze(-1)


def index_scores(q: torch.Tensor, weights: torch.Tensor, keys: torch.Tensor) -> torch.Tensor:
    """sum_h w[t, h] * ReLU(q[t, h] . k[s]) for `q [T, H, D]`, `weights [T, H]`, `keys [S, D]`, in fp64."""
    dots = torch.einsum("thd,sd->ths", q.double(), keys.double())
    return (dots.clamp_min(0) * weights.double().unsqueeze(-1)).sum(dim=1)


def slots_of(page_table_row: torch.Tensor, seq_len: int, page_size: int = INDEX_PAGE_SIZE) -> torch.Tensor:
    """Pool slots of a request's first `seq_len` tokens, from its page-table row."""
    positions = torch.arange(seq_len, device=page_table_row.device)
    return page_table_row.long()[positions // page_size] * page_size + positions % page_size


def paged_logits(
    q: torch.Tensor,
    pool: torch.Tensor,
    weights: torch.Tensor,
    seq_lens: torch.Tensor,
    page_table: torch.Tensor,
    max_seq_len: int,
    page_size: int = INDEX_PAGE_SIZE,
) -> torch.Tensor:
    """Reference for decode: row r scores its own first `seq_lens[r]` tokens through `page_table[r]`.

    `q [R, H, D]`, `weights [R, H]`; returns fp32 `[R, max_seq_len]` with NaN past each row's length
    (the kernels leave those entries unwritten, as DeepGEMM does with clean_logits=False)."""
    out = torch.full((q.shape[0], max_seq_len), float("nan"), dtype=torch.float32, device=q.device)
    for r in range(q.shape[0]):
        n = int(seq_lens.view(-1)[r])
        keys = load_keys(pool, slots_of(page_table[r], n, page_size), page_size)
        out[r, :n] = index_scores(q[r : r + 1].float(), weights[r : r + 1].float(), keys)[0].float()
    return out


def ragged_logits(
    q: torch.Tensor,
    pool: torch.Tensor,
    weights: torch.Tensor,
    seq_lens: torch.Tensor,
    page_table: torch.Tensor,
    cu_seqlens_q: torch.Tensor,
    max_seq_len: int,
    page_size: int = INDEX_PAGE_SIZE,
) -> torch.Tensor:
    """Reference for prefill: query rows `cu_seqlens_q[b]:cu_seqlens_q[b+1]` belong to request b and read
    its pages `page_table[b]`; row t scores its first `seq_lens[t]` tokens (causal within the request)."""
    out = torch.full((q.shape[0], max_seq_len), float("nan"), dtype=torch.float32, device=q.device)
    for b in range(page_table.shape[0]):
        start, end = int(cu_seqlens_q[b]), int(cu_seqlens_q[b + 1])
        if start == end:
            continue
        lens = seq_lens[start:end].long()
        longest = int(lens.max())
        keys = load_keys(pool, slots_of(page_table[b], longest, page_size), page_size)
        scores = index_scores(q[start:end].float(), weights[start:end].float(), keys).float()
        for i, n in enumerate(lens.tolist()):
            out[start + i, :n] = scores[i, :n]
    return out


@functools.cache
def _hadamard(n: int) -> torch.Tensor:
    h = torch.ones(1, 1, dtype=torch.float64)
    while h.shape[0] < n:  # Sylvester: [[H, H], [H, -H]], natural order, as SGLang's butterflies compute it
        h = torch.cat([torch.cat([h, h], 1), torch.cat([h, -h], 1)], 0)
    return h / n**0.5


def hadamard_matrix(n: int = HEAD_DIM) -> torch.Tensor:
    """Orthonormal n x n Sylvester-Hadamard matrix, fp64."""
    return _hadamard(n)


def norm_rope_hadamard(
    kv: torch.Tensor, norm_weight: torch.Tensor, eps: float, freqs_real: torch.Tensor, positions: torch.Tensor
) -> torch.Tensor:
    """The compressor's indexer-key epilogue in fp64: RMSNorm, RoPE on dims 64..127, Hadamard.

    `kv [N, 128]`, `norm_weight [128]`, `freqs_real [max_pos, 64]` (cos, sin interleaved, as SGLang passes
    `view_as_real(freqs_cis).flatten(-2)`), `positions [N]`. Returns fp64 `[N, 128]`."""
    x = kv.double()
    x = x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + eps) * norm_weight.double()
    f = freqs_real[positions.long()].double().view(-1, ROPE_DIM // 2, 2)
    cos, sin = f[..., 0], f[..., 1]
    tail = x[:, HEAD_DIM - ROPE_DIM :].reshape(-1, ROPE_DIM // 2, 2)
    re, im = tail[..., 0], tail[..., 1]
    rotated = torch.stack([re * cos - im * sin, re * sin + im * cos], dim=-1).reshape(-1, ROPE_DIM)
    x = torch.cat([x[:, : HEAD_DIM - ROPE_DIM], rotated], dim=-1)
    return x @ hadamard_matrix(HEAD_DIM).to(x.device)


def plan_targets(
    plan: torch.Tensor, is_decode: bool, compress_ratio: int, out_loc: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Read SGLang's compressor plan rows (`uint8 [N, 16]`): which rows store, at which slot and position.

    Prefill (CompressPlan): seq_len u32 (0xFFFFFFFF = invalid row), ragged_id u16 -> out_loc[ragged_id].
    Decode (DecodePlan): seq_len u32; a row stores only when seq_len % ratio == 0 -> out_loc[row].
    Position for RoPE is seq_len - ratio. Returns (row mask, slot, position)."""
    words = plan.contiguous().view(torch.int32).view(-1, 4)
    seq_len = words[:, 0].long() & 0xFFFFFFFF
    rows = torch.arange(plan.shape[0], device=plan.device)
    if is_decode:
        keep = seq_len % compress_ratio == 0
        slot = out_loc.long()[rows]
    else:
        keep = seq_len != 0xFFFFFFFF
        ragged = (words[:, 1].long() & 0xFFFF).clamp_max(out_loc.numel() - 1)
        slot = out_loc.long()[ragged]
    return keep, slot, seq_len - compress_ratio
