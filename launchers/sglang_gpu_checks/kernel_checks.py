"""Correctness checks of the index-K kernels on fresh random inputs, with poisoned (NaN) outputs.

Used by validate_on_gpu.py (full sizes on the H200) and by the tests (small sizes, any device). Every
check draws new inputs, fills the output with NaN first, and measures against fp64 math on the original
fp32 keys, so the error reported includes what the pool's storage (bf16 or fp8) costs.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from launchers.sglang.kernels import reference as ref
from launchers.sglang.kernels._logits_core import LogitsConfig
from launchers.sglang.kernels.layout import INDEX_PAGE_SIZE, IndexKDtype, new_pool
from launchers.sglang.kernels.paged_logits import paged_mqa_logits
from launchers.sglang.kernels.ragged_logits import ragged_paged_mqa_logits
from launchers.sglang.kernels.store import norm_rope_hadamard_store, store_index_k


@dataclass(frozen=True)
class LogitsCheck:
    kind: IndexKDtype
    path: str  # "paged decode" or "ragged prefill"
    rows: int
    max_len: int
    all_written: bool  # every entry inside a row's length finite, every entry past it still NaN
    rel_err_vs_fp32: float  # max over rows of max|out - exact| / max|exact|, exact = fp64 on fp32 keys
    rel_err_vs_stored: float  # same against fp64 on the keys as the pool stores them (kernel math alone)
    topk_overlap: dict[int, float]  # index_topk -> mean over rows of |top-k(out) & top-k(exact)| / k
    topk_overlap_min: dict[int, float]


@dataclass(frozen=True)
class StoreCheck:
    kind: IndexKDtype
    path: str
    rows: int
    bytes_equal_fraction: float  # pool bytes equal to the torch reference store
    max_err_vs_exact: float  # max |read back - fp64 epilogue| / max |fp64 epilogue|


def random_queries(
    rows: int, heads: int, gen: torch.Generator, device: torch.device
) -> tuple[torch.Tensor, torch.Tensor]:
    """q as SGLang's fused q kernel hands it over: fp8 e4m3 per (row, head), its scale folded into the
    signed per-head weights. Returns (q_fp8 [rows, H, 128], weights fp32 [rows, H])."""
    q = torch.randn(rows, heads, 128, generator=gen, device=device)
    q8, scale = ref.quantize_fp8_rows(q)
    weights = torch.randn(rows, heads, generator=gen, device=device) * scale
    return q8, weights


def _perm(n: int, seed: int, device: torch.device) -> torch.Tensor:
    return torch.randperm(n, generator=torch.Generator().manual_seed(seed)).to(device)


def _pages_for(lengths: list[int], seed: int, device: torch.device) -> tuple[torch.Tensor, int]:
    """Distinct, shuffled pages for each request: page_table [B, max_pages] int32 and the pool size."""
    counts = [-(-n // INDEX_PAGE_SIZE) for n in lengths]
    total = sum(counts) + 1
    order = _perm(total, seed, device)
    table = torch.zeros(len(lengths), max(counts), dtype=torch.int32, device=device)
    start = 0
    for b, c in enumerate(counts):
        table[b, :c] = order[start : start + c].int()
        start += c
    return table, total


def _rel_err(out: torch.Tensor, exact: torch.Tensor) -> float:
    return ((out.double() - exact).abs().max() / exact.abs().max().clamp_min(1e-30)).item()


def _overlap(out: torch.Tensor, exact: torch.Tensor, k: int) -> float:
    k = min(k, out.numel())
    got = set(out.topk(k).indices.tolist())
    want = set(exact.topk(k).indices.tolist())
    return len(got & want) / k


def _score_rows(
    out: torch.Tensor,
    q8: torch.Tensor,
    weights: torch.Tensor,
    lens: list[int],
    keys_of_row,
    stored_of_row,
    topks: tuple[int, ...],
) -> tuple[bool, float, float, dict[int, list[float]]]:
    written = True
    err_fp32 = err_stored = 0.0
    overlaps: dict[int, list[float]] = {k: [] for k in topks}
    for r, n in enumerate(lens):
        row = out[r]
        written &= bool(torch.isfinite(row[:n]).all()) and bool(row[n:].isnan().all())
        exact = ref.index_scores(q8[r : r + 1].float(), weights[r : r + 1], keys_of_row(r))[0]
        stored = ref.index_scores(q8[r : r + 1].float(), weights[r : r + 1], stored_of_row(r))[0]
        got = row[:n].nan_to_num(0.0)
        err_fp32 = max(err_fp32, _rel_err(got, exact))
        err_stored = max(err_stored, _rel_err(got, stored))
        for k in topks:
            overlaps[k].append(_overlap(got.double(), exact, k))
    return written, err_fp32, err_stored, overlaps


def check_paged(
    kind: IndexKDtype,
    lengths: list[int],
    heads: int,
    topks: tuple[int, ...],
    seed: int,
    device: torch.device,
    config: LogitsConfig | None = None,
) -> LogitsCheck:
    """Decode: one query row per request, each over its own shuffled pages."""
    gen = torch.Generator(device=device).manual_seed(seed)
    table, num_pages = _pages_for(lengths, seed, device)
    pool = new_pool(num_pages, kind, device)
    keys = [torch.randn(n, 128, generator=gen, device=device) for n in lengths]
    for b, n in enumerate(lengths):
        store_index_k(keys[b], ref.slots_of(table[b], n), pool)
    q8, weights = random_queries(len(lengths), heads, gen, device)
    max_len = max(lengths)
    out = torch.full((len(lengths), max_len), float("nan"), device=device)
    seq_lens = torch.tensor(lengths, dtype=torch.int32, device=device)
    paged_mqa_logits(
        q8.unsqueeze(1), pool, weights, seq_lens.view(-1, 1), table, None, max_len, out=out, config=config
    )
    written, e32, est, ov = _score_rows(
        out, q8, weights, lengths, lambda r: keys[r], lambda r: ref.stored_precision(keys[r], kind), topks
    )
    return LogitsCheck(
        kind, "paged decode", len(lengths), max_len, written, e32, est,
        {k: sum(v) / len(v) for k, v in ov.items()}, {k: min(v) for k, v in ov.items()},
    )  # fmt: skip


def check_ragged(
    kind: IndexKDtype,
    context: int,
    rows: int,
    heads: int,
    topks: tuple[int, ...],
    seed: int,
    device: torch.device,
    config: LogitsConfig | None = None,
) -> LogitsCheck:
    """Prefill: `rows` query tokens of one request; row t sees the first `context - rows + t + 1` keys."""
    gen = torch.Generator(device=device).manual_seed(seed)
    table, num_pages = _pages_for([context], seed, device)
    pool = new_pool(num_pages, kind, device)
    keys = torch.randn(context, 128, generator=gen, device=device)
    store_index_k(keys, ref.slots_of(table[0], context), pool)
    stored = ref.stored_precision(keys, kind)
    q8, weights = random_queries(rows, heads, gen, device)
    lens = [context - rows + t + 1 for t in range(rows)]
    out = torch.full((rows, context), float("nan"), device=device)
    seq_lens = torch.tensor(lens, dtype=torch.int32, device=device)
    cu = torch.tensor([0, rows], dtype=torch.int32, device=device)
    ragged_paged_mqa_logits(q8, pool, weights, seq_lens, table, cu, rows, context, out=out, config=config)
    written, e32, est, ov = _score_rows(
        out, q8, weights, lens, lambda r: keys[: lens[r]], lambda r: stored[: lens[r]], topks
    )
    return LogitsCheck(
        kind, "ragged prefill", rows, context, written, e32, est,
        {k: sum(v) / len(v) for k, v in ov.items()}, {k: min(v) for k, v in ov.items()},
    )  # fmt: skip


def check_store(kind: IndexKDtype, rows: int, seed: int, device: torch.device) -> StoreCheck:
    """Plain store: bytes against the torch reference store, into poisoned (0xFF) pages."""
    gen = torch.Generator(device=device).manual_seed(seed)
    num_pages = -(-rows // INDEX_PAGE_SIZE) * 2
    k = torch.randn(rows, 128, generator=gen, device=device) * 3
    loc = _perm(num_pages * INDEX_PAGE_SIZE, seed, device)[:rows]
    got, want = new_pool(num_pages, kind, device).fill_(0xFF), new_pool(num_pages, kind, device).fill_(0xFF)
    store_index_k(k, loc, got)
    ref.store_keys(want, k, loc)
    back = ref.load_keys(got, loc)
    err = ((back - k).abs().max() / k.abs().max()).item()
    return StoreCheck(kind, "store", rows, (got == want).float().mean().item(), err)


def check_fused_store(
    kind: IndexKDtype, rows: int, is_decode: bool, seed: int, device: torch.device
) -> StoreCheck:
    """The compressor epilogue (norm, RoPE, Hadamard, store) against its fp64 reference, through plan rows."""
    gen = torch.Generator(device=device).manual_seed(seed)
    ratio, max_pos, num_pages = 4, 1 << 16, -(-rows // INDEX_PAGE_SIZE) * 2
    kv = (torch.randn(rows, 128, generator=gen, device=device) * 2).bfloat16()
    norm_w = (torch.rand(128, generator=gen, device=device) + 0.5).bfloat16()
    angles = torch.rand(max_pos, 32, generator=gen, device=device) * 6.2832
    freqs = torch.view_as_real(torch.polar(torch.ones_like(angles), angles)).flatten(-2).float().contiguous()
    words = torch.zeros(rows, 4, dtype=torch.int32, device=device)
    words[:, 0] = torch.randint(1, max_pos // ratio, (rows,), generator=gen, device=device) * ratio
    slots = _perm(num_pages * INDEX_PAGE_SIZE, seed, device)
    if is_decode:
        words[::3, 0] += 1  # not on a compression boundary: must not store
        out_loc = slots[:rows]
    else:
        words[::5, 0] = -1  # invalid plan row: must not store
        words[:, 1] = _perm(rows * 2, seed + 1, device)[:rows].int()
        out_loc = slots[: rows * 2]
    plan = words.view(torch.uint8).view(rows, 16)
    got = new_pool(num_pages, kind, device).fill_(0xFF)
    norm_rope_hadamard_store(
        kv, plan, is_decode=is_decode, compress_ratio=ratio, norm_weight=norm_w, eps=1e-6,
        freqs_real=freqs, out_loc=out_loc, pool=got,
    )  # fmt: skip
    keep, slot, pos = ref.plan_targets(plan, is_decode, ratio, out_loc)
    exact = ref.norm_rope_hadamard(kv[keep], norm_w, 1e-6, freqs, pos[keep])
    want = new_pool(num_pages, kind, device).fill_(0xFF)
    ref.store_keys(want, exact.float(), slot[keep])
    err = ((ref.load_keys(got, slot[keep]).double() - exact).abs().max() / exact.abs().max()).item()
    path = "fused store (decode)" if is_decode else "fused store (prefill)"
    return StoreCheck(kind, path, rows, (got == want).float().mean().item(), err)
