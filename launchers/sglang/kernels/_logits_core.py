"""The one Triton kernel behind both logits entry points (paged decode and ragged prefill).

A program takes BLOCK_Q query rows of one request (BLOCK_Q = 1 for decode) and a range of that request's
pages. It keeps the rows' queries as one `[BLOCK_Q * H, D]` tile and walks the pages PAGES_PER_ITER at a
time, loading each page's keys straight from the pool (no gathered copy) into one `[keys, D]` tile, taking
all (key, query-head) dot products on the tensor cores, then ReLU, the per-head weights, the sum over
heads, the fp8 key scale, and writing the rows' logits for the keys inside each row's length. Nothing but
the logits is written to memory.

KEYS_AS_ROWS picks the orientation of the product: `k @ q^T` (keys on the MMA's M side, the head sum runs
along N, mostly inside a thread) or `q @ k^T` (heads on M, the sum crosses warps). Both compute the same
numbers; validate_on_gpu.py times both.
"""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass

import torch
import triton
import triton.language as tl

from launchers.sglang.kernels._triton_utils import (
    TensorDescriptor,
    gdc_launch_dependents,
    gdc_wait,
    interpreting,
    pdl_supported,
    prefetch_l2,
    tma_supported,
)
from launchers.sglang.kernels.layout import HEAD_DIM, as_page_rows, pool_kind


@triton.jit(do_not_specialize=["page_table_stride", "out_stride", "pages_per_split"])
def index_logits_kernel(
    q_ptr,
    w_ptr,
    pool_u8,
    pool_f32,
    pool_bf16,
    page_table_ptr,
    seq_lens_ptr,
    cu_q_ptr,
    out_ptr,
    k_desc,  # TMA descriptor over the bf16 pool as [pages * PAGE_SIZE, D] rows (KEYS_TMA), else None
    page_table_stride,
    out_stride,
    pages_per_split,
    H: tl.constexpr,
    D: tl.constexpr,
    PAGE_SIZE: tl.constexpr,
    BLOCK_Q: tl.constexpr,
    PAGES_PER_ITER: tl.constexpr,
    BK: tl.constexpr,  # keys per step, PAGES_PER_ITER * PAGE_SIZE
    KEYS_AS_ROWS: tl.constexpr,
    KIND_FP8: tl.constexpr,
    RAGGED: tl.constexpr,
    FP8_DOT: tl.constexpr,
    FP32_DOT: tl.constexpr,
    NUM_STAGES: tl.constexpr,
    PDL: tl.constexpr,  # launched as a programmatic dependent launch (overlaps the previous kernel's tail)
    STREAM_KEYS: tl.constexpr,  # keys are read once: ask L2 to evict them first
    PREFETCH_PAGES: tl.constexpr,  # decode: L2-prefetch this many of the program's pages before the wait
    KEYS_TMA: tl.constexpr,  # bf16, one page per step: keys arrive by TMA bulk copies through k_desc
    PAGE_BYTES: tl.constexpr,  # pool bytes per page
    PF_LINES: tl.constexpr,  # 128-byte lines per page, rounded up to a power of two
):
    if PREFETCH_PAGES > 0 and not RAGGED:
        # Before the grid dependency wait (so while the previous kernel still runs): read this program's
        # length and page numbers through the L2 only (.cg: no stale L1 copy survives the wait) and
        # prefetch its first pages into the L2. Nothing is used before the wait; a page number or line
        # that the previous kernel rewrites is reread after it (the L2 is coherent).
        pf_req = tl.program_id(1)
        pf_begin = tl.program_id(2) * pages_per_split
        pf_len = tl.load(seq_lens_ptr + pf_req, cache_modifier=".cg")
        pf_end = tl.minimum(tl.cdiv(pf_len, PAGE_SIZE), pf_begin + pages_per_split)
        pf = tl.arange(0, PREFETCH_PAGES * PF_LINES)
        pf_page = pf_begin + pf // PF_LINES
        pf_line = pf % PF_LINES
        pf_ok = (pf_page < pf_end) & (pf_line * 128 < PAGE_BYTES)
        pf_table = page_table_ptr + pf_req.to(tl.int64) * page_table_stride + pf_page
        pf_at = tl.load(pf_table, mask=pf_ok, other=0, cache_modifier=".cg").to(tl.int64)
        prefetch_l2(pool_u8 + pf_at * PAGE_BYTES + pf_line * 128, pf_ok)
    if PDL:
        # the previous kernel (q, weights, the new key's store) must be done before the first read; the
        # next kernel may start its own launch now, since it too waits before reading what this writes
        gdc_wait()
        gdc_launch_dependents()
    q_block = tl.program_id(0)
    req = tl.program_id(1)
    split = tl.program_id(2)
    if RAGGED:
        row_begin = tl.load(cu_q_ptr + req) + q_block * BLOCK_Q
        row_end = tl.load(cu_q_ptr + req + 1)
    else:
        row_begin = req + q_block * BLOCK_Q
        row_end = req + 1
    if row_begin < row_end:
        qrows = row_begin + tl.arange(0, BLOCK_Q)
        qrow_ok = qrows < row_end
        lens = tl.load(seq_lens_ptr + qrows, mask=qrow_ok, other=0)
        n_pages = tl.cdiv(tl.max(lens, axis=0), PAGE_SIZE)
        p_begin = split * pages_per_split
        p_end = tl.minimum(n_pages, p_begin + pages_per_split)

        # queries of the block as rows (query, head); weights alike
        r = tl.arange(0, BLOCK_Q * H)
        row = (row_begin + r // H).to(tl.int64)
        row_ok = row < row_end
        d = tl.arange(0, D)
        q = tl.load(q_ptr + (row * H + r % H)[:, None] * D + d[None, :], mask=row_ok[:, None], other=0.0)
        w = tl.load(w_ptr + row * H + r % H, mask=row_ok, other=0.0).to(tl.float32)
        if FP32_DOT:
            q = q.to(tl.float32)
        elif FP8_DOT:
            q = q.to(tl.float8e4nv)
        else:
            q = q.to(tl.bfloat16)

        kk = tl.arange(0, BK)
        j = kk % PAGE_SIZE
        page_table_row = page_table_ptr + req.to(tl.int64) * page_table_stride
        out_rows = out_ptr + qrows.to(tl.int64) * out_stride
        for it in tl.range(p_begin, p_end, PAGES_PER_ITER, num_stages=NUM_STAGES):
            p = it + kk // PAGE_SIZE
            p_ok = p < p_end
            if KEYS_TMA:
                # one page per step (p_ok holds: it < p_end); the copy engine fetches the whole page
                k = k_desc.load([tl.load(page_table_row + it) * PAGE_SIZE, 0])
            elif KIND_FP8:
                page = tl.load(page_table_row + p, mask=p_ok, other=0).to(tl.int64)
                page_bytes = PAGE_SIZE * (D + 4)
                k = tl.load(
                    pool_u8 + (page * page_bytes + j * D)[:, None] + d[None, :],
                    mask=p_ok[:, None],
                    other=0,
                    eviction_policy="evict_first" if STREAM_KEYS else "",
                )
                k = k.to(tl.float8e4nv, bitcast=True)
                k_scale = tl.load(
                    pool_f32 + page * (page_bytes // 4) + (PAGE_SIZE * D) // 4 + j, mask=p_ok, other=0.0
                )
            else:
                page = tl.load(page_table_row + p, mask=p_ok, other=0).to(tl.int64)
                k = tl.load(
                    pool_bf16 + (page * (PAGE_SIZE * D) + j * D)[:, None] + d[None, :],
                    mask=p_ok[:, None],
                    other=0.0,
                    eviction_policy="evict_first" if STREAM_KEYS else "",
                )
            if FP32_DOT:
                k = k.to(tl.float32)
            elif not FP8_DOT:
                k = k.to(tl.bfloat16)
            pos = it * PAGE_SIZE + kk  # token index of each key in the request
            if KEYS_AS_ROWS:
                if FP32_DOT:
                    s = tl.dot(k, tl.trans(q), input_precision="ieee")
                else:
                    s = tl.dot(k, tl.trans(q))
                s = tl.maximum(s, 0.0) * w[None, :]
                logits = tl.sum(tl.reshape(s, (BK, BLOCK_Q, H)), axis=2)  # [keys, query rows]
                if KIND_FP8:
                    logits = logits * k_scale[:, None]
                keep = p_ok[:, None] & (pos[:, None] < lens[None, :])
                tl.store(out_rows[None, :] + pos[:, None], logits, mask=keep)
            else:
                if FP32_DOT:
                    s = tl.dot(q, tl.trans(k), input_precision="ieee")
                else:
                    s = tl.dot(q, tl.trans(k))
                s = tl.maximum(s, 0.0) * w[:, None]
                logits = tl.sum(tl.reshape(s, (BLOCK_Q, H, BK)), axis=1)  # [query rows, keys]
                if KIND_FP8:
                    logits = logits * k_scale[None, :]
                keep = p_ok[None, :] & (pos[None, :] < lens[:, None])
                tl.store(out_rows[:, None] + pos[None, :], logits, mask=keep)


@dataclass(frozen=True)
class LogitsConfig:
    """Launch shape. Defaults were picked on an H200 with validate_on_gpu.py (see KERNELS.md)."""

    num_warps: int = 4
    num_stages: int = 3
    block_q: int = 2  # query rows per program in the ragged (prefill) kernel; decode always uses 1
    pages_per_iter: int = 1
    keys_as_rows: bool = False
    programs_per_sm: int = 8  # split key ranges until about this many programs per SM ...
    max_pages_per_program: int = 32  # ... and, in decode, until no program walks more pages than this
    # same number of splits, but of equal length (a cap that does not divide the pages leaves a short
    # last split per request, so the grid ends on a ragged wave)
    even_splits: bool = False
    # programmatic dependent launch (Hopper+): the launch overlaps the previous kernel's tail
    pdl: bool = False
    stream_keys: bool = False  # evict-first hint on key loads
    # decode: pages per program prefetched into the L2 before the grid dependency wait (0: none); with
    # PDL that overlaps the first pages' DRAM latency with the previous kernel's tail
    prefetch_pages: int = 0
    # bf16 with one page per step: load keys by TMA (Hopper's bulk tensor copies) instead of per-thread loads
    keys_tma: bool = False
    # decode calls large enough that `max_pages_per_program` binds (more pages in the call than
    # programs_per_sm x SMs x that cap) launch with this pipeline depth and cap instead, where set
    large_call_stages: int | None = None
    large_call_max_pages: int | None = None

    def for_decode_call(self, pages_in_call: int, num_sms: int) -> LogitsConfig:
        """The shape a decode call of `pages_in_call` pages (over all its requests) launches with: this
        one, or for a large call its large-call stages and cap. Depends only on shapes (CUDA graphs)."""
        if self.large_call_stages is None and self.large_call_max_pages is None:
            return self
        if triton.cdiv(pages_in_call, self.programs_per_sm * num_sms) <= self.max_pages_per_program:
            return self
        return dataclasses.replace(
            self,
            num_stages=self.large_call_stages or self.num_stages,
            max_pages_per_program=self.large_call_max_pages or self.max_pages_per_program,
            large_call_stages=None,
            large_call_max_pages=None,
            prefetch_pages=0,  # large calls stream for long: the first pages' latency does not show
        )


DEFAULT_CONFIG = LogitsConfig(keys_as_rows=True)
# per (kind, ragged) launch shapes picked by validate_on_gpu.py's sweep on an H200, 2026-11-29 12:13 UTC
# (KERNELS.md). bf16 decode: 4 programs per SM (one request of 128K keys: 512 programs of 4 pages), 2
# stages (less shared memory, so all 512 fit in one wave) and PDL: 13.7 -> 12.0 us for that call.
# Large bf16 decode calls (over 16896 pages = 4 x 132 SMs x 32 on an H200, e.g. 128K keys x 9+ requests)
# launch with 3 stages and programs of up to 256 pages: 1.1-1.7% faster at 128K x 64 - 512K x 64 in the
# anchor sweep of 2026-11-30 21:18 UTC (KERNELS.md); 3 stages cost ~0.4 us on the small calls, so they
# keep 2. Never combine even_splits with a cap >= 256: that sweep timed it at 68% of copy at 128K x 64.
TUNED: dict[tuple[str, bool], LogitsConfig] = {
    ("bf16", False): LogitsConfig(
        num_warps=4,
        num_stages=2,
        pages_per_iter=1,
        keys_as_rows=True,
        programs_per_sm=4,
        pdl=True,
        large_call_stages=3,
        large_call_max_pages=256,
    ),
    ("fp8", False): LogitsConfig(num_warps=4, num_stages=4, pages_per_iter=2, keys_as_rows=True, pdl=True),
    ("bf16", True): LogitsConfig(num_warps=8, num_stages=3, block_q=4, pages_per_iter=1, keys_as_rows=True),
    ("fp8", True): LogitsConfig(num_warps=4, num_stages=3, block_q=2, pages_per_iter=1, keys_as_rows=True),
}


def default_config(kind: str, ragged: bool) -> LogitsConfig:
    return TUNED.get((kind, ragged), DEFAULT_CONFIG)


@functools.cache
def _num_sms(device: torch.device) -> int:
    if device.type == "cuda":
        return torch.cuda.get_device_properties(device).multi_processor_count
    return 2


def check_pool_and_query(q: torch.Tensor, pool: torch.Tensor, page_size: int) -> tuple[bool, torch.Tensor]:
    rows = as_page_rows(pool)
    kind = pool_kind(rows, page_size)
    if q.shape[-1] != HEAD_DIM:
        raise ValueError(f"index queries must have head_dim {HEAD_DIM}, got {tuple(q.shape)}")
    return kind == "fp8", rows


def pages_per_program(
    max_pages: int, programs_without_split: int, ragged: bool, config: LogitsConfig, device: torch.device
) -> int:
    """How many pages one program walks: enough programs to fill the GPU several times over (short
    tails), in whole iterations; decode also caps it so a large batch is cut into many small programs;
    with `even_splits` the same number of splits share the pages evenly."""
    wanted = config.programs_per_sm * _num_sms(device)
    per_program = triton.cdiv(max_pages * programs_without_split, wanted)
    if not ragged:
        per_program = min(per_program, config.max_pages_per_program)
    step = config.pages_per_iter
    per_program = min(max(step, triton.cdiv(per_program, step) * step), triton.cdiv(max_pages, step) * step)
    if config.even_splits:
        splits = triton.cdiv(max_pages, per_program)
        per_program = triton.cdiv(triton.cdiv(max_pages, splits), step) * step
    return per_program


def launch(
    *,
    q: torch.Tensor,
    weights: torch.Tensor,
    pool: torch.Tensor,
    page_table: torch.Tensor,
    seq_lens: torch.Tensor,
    cu_q: torch.Tensor | None,
    out: torch.Tensor | None,
    num_requests: int,
    max_q_len: int,
    max_seq_len: int,
    page_size: int,
    config: LogitsConfig | None,
) -> torch.Tensor:
    """Launch the kernel over `num_requests` requests of up to `max_q_len` query rows each (ragged when
    `cu_q` is given, else one row per request) and return the fp32 `[rows, max_seq_len]` logits, in `out`
    if given. `config` defaults to the tuned shape for the pool's kind. The grid depends only on shapes,
    so the launch can be captured in a CUDA graph."""
    is_fp8, rows = check_pool_and_query(q, pool, page_size)
    ragged = cu_q is not None
    if config is None:
        config = default_config("fp8" if is_fp8 else "bf16", ragged)
    if out is None:
        out = torch.empty(q.shape[0], max_seq_len, dtype=torch.float32, device=q.device)
    q, weights, seq_lens = q.contiguous(), weights.contiguous(), seq_lens.contiguous()
    if page_table.stride(-1) != 1:
        page_table = page_table.contiguous()
    heads = q.shape[-2]
    max_pages = min(page_table.shape[1], triton.cdiv(max_seq_len, page_size))
    if num_requests == 0 or max_q_len == 0 or max_pages == 0:
        return out
    if not ragged:
        config = config.for_decode_call(max_pages * num_requests, _num_sms(q.device))
    block_q = config.block_q if ragged else 1
    q_blocks = triton.cdiv(max_q_len, block_q)
    per_program = pages_per_program(max_pages, q_blocks * num_requests, ragged, config, q.device)
    splits = triton.cdiv(max_pages, per_program)
    fp32_dot = interpreting()
    pdl = config.pdl and pdl_supported(q.device)
    # TMA keys only where they were seen right: with 8 query rows per program (512 product columns) the
    # TMA path gave wrong logits on an H100 with Triton 3.6 (relative error 1.4, 2026-12-07 sweep)
    keys_tma = (
        config.keys_tma
        and not is_fp8
        and config.pages_per_iter == 1
        and block_q * heads <= 256
        and tma_supported(q.device)
    )
    k_desc = None
    if keys_tma:
        k_desc = TensorDescriptor.from_tensor(
            rows.view(torch.bfloat16).view(-1, HEAD_DIM), [page_size, HEAD_DIM]
        )
    index_logits_kernel[(q_blocks, num_requests, splits)](
        q,
        weights,
        rows,
        rows.view(torch.float32),
        rows.view(torch.bfloat16),
        page_table,
        seq_lens,
        cu_q.contiguous() if ragged else seq_lens,
        out,
        k_desc,
        page_table.stride(0),
        out.stride(0),
        per_program,
        H=heads,
        D=HEAD_DIM,
        PAGE_SIZE=page_size,
        BLOCK_Q=block_q,
        PAGES_PER_ITER=config.pages_per_iter,
        BK=config.pages_per_iter * page_size,
        KEYS_AS_ROWS=config.keys_as_rows,
        KIND_FP8=is_fp8,
        RAGGED=ragged,
        FP8_DOT=is_fp8 and q.dtype == torch.float8_e4m3fn and not fp32_dot,
        FP32_DOT=fp32_dot,
        NUM_STAGES=config.num_stages,
        PDL=pdl,
        STREAM_KEYS=config.stream_keys,
        PREFETCH_PAGES=0 if ragged or interpreting() else config.prefetch_pages,
        KEYS_TMA=keys_tma,
        PAGE_BYTES=rows.shape[1],
        PF_LINES=triton.next_power_of_2(triton.cdiv(rows.shape[1], 128)),
        num_warps=config.num_warps,
        **({"launch_pdl": True} if pdl else {}),
    )
    return out
