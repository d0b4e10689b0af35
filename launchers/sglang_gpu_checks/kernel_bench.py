"""Timing and peak-memory measurements of the index-K kernels (used by validate_on_gpu.py).

Times are medians of `triton.testing.do_bench` (CUDA events, L2 flushed before every run), so a 32 MB
working set is read from HBM, not from the 60 MB L2. Bandwidth counts the bytes the kernel must move:
every key's pool bytes once, plus the fp32 logits written. On a CPU (the interpreter dry run) times are
one wall-clock run and mean nothing.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from dataclasses import dataclass

import torch
import triton
import triton.language as tl

from launchers.sglang.kernels import layout
from launchers.sglang.kernels._logits_core import LogitsConfig, _num_sms, pages_per_program
from launchers.sglang.kernels._triton_utils import gdc_launch_dependents, gdc_wait, pdl_supported
from launchers.sglang.kernels.layout import HEAD_DIM, INDEX_PAGE_SIZE, IndexKDtype
from launchers.sglang.kernels.paged_logits import paged_mqa_logits
from launchers.sglang.kernels.ragged_logits import ragged_paged_mqa_logits
from launchers.sglang_gpu_checks.kernel_checks import random_queries

HEADS = 64


def median_ms(fn: Callable[[], object], device: torch.device, rep_ms: int = 25) -> float:
    if device.type == "cuda":
        return float(triton.testing.do_bench(fn, warmup=10, rep=rep_ms, return_mode="median"))
    start = time.perf_counter()
    fn()
    return (time.perf_counter() - start) * 1e3


def copy_bandwidth_gbs(device: torch.device, nbytes: int) -> float:
    """Device-to-device copy, bytes read plus bytes written per second, in GB/s."""
    src = torch.empty(nbytes, dtype=torch.uint8, device=device).random_(0, 255)
    dst = torch.empty_like(src)
    ms = median_ms(lambda: dst.copy_(src), device, rep_ms=100)
    return 2 * nbytes / ms / 1e6


def random_pool(kind: IndexKDtype, num_pages: int, device: torch.device, seed: int) -> torch.Tensor:
    """A pool full of valid random keys (no NaN codes), written directly: timing needs no store pass."""
    gen = torch.Generator(device=device).manual_seed(seed)
    pool = layout.new_pool(num_pages, kind, device)
    values = pool[:, : INDEX_PAGE_SIZE * 128] if kind == "fp8" else pool
    chunk = 1 << 14  # pages per fill step, to bound the fp32 temporaries
    for start in range(0, num_pages, chunk):
        part = values[start : start + chunk]
        target_dtype = torch.float8_e4m3fn if kind == "fp8" else torch.bfloat16
        view = part.view(target_dtype)
        view.copy_(torch.randn(view.shape, generator=gen, device=device).to(target_dtype))
    if kind == "fp8":
        scales = pool[:, INDEX_PAGE_SIZE * 128 :].view(torch.float32)
        scales.copy_(torch.rand(scales.shape, generator=gen, device=device) * 0.01 + 1e-3)
    return pool


@dataclass(frozen=True)
class DecodeTiming:
    kind: IndexKDtype
    keys: int  # context length of every request, in compressed tokens
    batch: int
    ms: float
    gbs: float  # achieved: (pool bytes of all keys + logits bytes) / time

    @property
    def ns_per_key(self) -> float:
        return self.ms * 1e6 / (self.keys * self.batch)


# consecutive calls in one timed graph read at least this many distinct bytes (the L2 is 60 MB): at 1 GiB a
# short call (one request, 128K keys, 32 MiB) is replayed 64 times, so the graph's own launch is amortized
# as in a decode step's graph of hundreds of kernels (256 MiB, 16 calls, read 1-4% slower: KERNELS.md)
ROTATION_BYTES = 1 << 30


def decode_pool_pages(
    largest_call_keys: int, device: torch.device, rotation_bytes: int = ROTATION_BYTES
) -> int:
    """Pages a timing pool needs so that every call in a replay reads its own pages (the full rotation
    `_decode_tables` aims at) for any call up to `largest_call_keys` keys. A smaller pool cuts the
    rotation, and fewer calls per replay read slower (KERNELS.md: 8 calls, 13.1 us instead of 12.0).
    A CPU times one call, so it needs only the largest call's pages."""
    largest = largest_call_keys // INDEX_PAGE_SIZE
    return max(largest, rotation_bytes // (INDEX_PAGE_SIZE * 128)) if device.type == "cuda" else largest


def _decode_tables(
    pool: torch.Tensor, keys: int, batch: int, device: torch.device, rotation_bytes: int
) -> torch.Tensor:
    """`[rotation, batch, pages]` page tables over disjoint shuffled pages, one per call in the graph."""
    pages = keys // INDEX_PAGE_SIZE
    per_call = batch * pages
    rotation = max(
        1, min(256, rotation_bytes // (per_call * INDEX_PAGE_SIZE * 128), pool.shape[0] // per_call)
    )
    chosen = torch.randperm(pool.shape[0], generator=torch.Generator().manual_seed(keys * 7 + batch))
    return chosen[: rotation * per_call].view(rotation, batch, pages).to(device=device, dtype=torch.int32)


def _ms_per_call(call: Callable[[int], None], rotation: int, device: torch.device) -> float:
    """Median ms of one call, from CUDA-graph replays of `rotation` calls (one wall-clock run on a CPU)."""
    call(0)  # compile outside the capture
    if device.type != "cuda":
        return median_ms(lambda: call(0), device)
    torch.cuda.synchronize(device)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for i in range(rotation):
            call(i)
    return median_ms(graph.replay, device) / rotation


def time_decode(
    kind: IndexKDtype,
    pool: torch.Tensor,
    keys: int,
    batch: int,
    config: LogitsConfig,
    device: torch.device,
    rotation_bytes: int = ROTATION_BYTES,
) -> DecodeTiming:
    """Decode as SGLang runs it, captured in a CUDA graph. Each request gets its own shuffled pages; the
    graph holds several calls on disjoint pages so that small calls still read from HBM, not L2."""
    tables = _decode_tables(pool, keys, batch, device, rotation_bytes)
    q8, weights = random_queries(
        batch, HEADS, torch.Generator(device=device).manual_seed(keys + batch), device
    )
    q8 = q8.unsqueeze(1)
    lens = torch.full((batch, 1), keys, dtype=torch.int32, device=device)
    out = torch.empty(batch, keys, dtype=torch.float32, device=device)

    def call(i: int) -> None:
        paged_mqa_logits(q8, pool, weights, lens, tables[i], None, keys, out=out, config=config)

    ms = _ms_per_call(call, tables.shape[0], device)
    moved = batch * keys * (layout.bytes_per_token(kind) + 4)
    return DecodeTiming(kind, keys, batch, ms, moved / ms / 1e6)


def time_same_size_copy(
    moved_bytes: int, device: torch.device, rotation_bytes: int = ROTATION_BYTES
) -> DecodeTiming:
    """A device-to-device copy that moves `moved_bytes` (half read, half written: as many bytes as one
    decode call), timed as decode is: CUDA-graph replays of copies over disjoint buffers (>= 1 GiB read
    per replay, L2 flushed before each replay). What a call of that size gets at best, beside the copy
    bandwidth of one 4 GiB copy that the shares are taken against (never replaced by this)."""
    half = max(16, moved_bytes // 2 // 16 * 16)
    rotation = max(1, min(256, rotation_bytes // half)) if device.type == "cuda" else 1
    src = torch.empty(rotation, half, dtype=torch.uint8, device=device).random_(0, 255)
    dst = torch.empty_like(src)
    ms = _ms_per_call(lambda i: dst[i].copy_(src[i]), rotation, device)
    return DecodeTiming("bf16", 0, 0, ms, 2 * half / ms / 1e6)


@triton.jit
def read_floor_kernel(
    pool_bf16, page_table_ptr, out_ptr, page_table_stride, pages_per_split, n_pages,
    D: tl.constexpr, PAGE_SIZE: tl.constexpr, NUM_STAGES: tl.constexpr,
):  # fmt: skip
    """The decode kernel's memory traffic without its math: walk the same pages, sum each key, write one
    fp32 per key."""
    req = tl.program_id(1)
    p_begin = tl.program_id(2) * pages_per_split
    p_end = tl.minimum(n_pages, p_begin + pages_per_split)
    j = tl.arange(0, PAGE_SIZE)
    d = tl.arange(0, D)
    table_row = page_table_ptr + req.to(tl.int64) * page_table_stride
    out_row = out_ptr + req.to(tl.int64) * n_pages * PAGE_SIZE
    for p in tl.range(p_begin, p_end, num_stages=NUM_STAGES):
        page = tl.load(table_row + p).to(tl.int64)
        k = tl.load(pool_bf16 + page * (PAGE_SIZE * D) + j[:, None] * D + d[None, :])
        tl.store(out_row + p * PAGE_SIZE + j, tl.sum(k.to(tl.float32), 1))


def time_read_floor(
    pool: torch.Tensor,
    keys: int,
    batch: int,
    config: LogitsConfig,
    device: torch.device,
    rotation_bytes: int = ROTATION_BYTES,
) -> DecodeTiming:
    """The read-only floor for bf16 decode: same grid, page walk and logits bytes as the decode kernel
    under `config`, timed the same way. No key-reading kernel of this shape does much better."""
    tables = _decode_tables(pool, keys, batch, device, rotation_bytes)
    pages = tables.shape[2]
    config = config.for_decode_call(pages * batch, _num_sms(device))
    per_program = pages_per_program(pages, batch, False, config, device)
    grid = (1, batch, triton.cdiv(pages, per_program))
    out = torch.empty(batch, keys, dtype=torch.float32, device=device)
    rows = layout.as_page_rows(pool).view(torch.bfloat16)

    def call(i: int) -> None:
        read_floor_kernel[grid](
            rows, tables[i], out, pages, per_program, pages,
            D=HEAD_DIM, PAGE_SIZE=INDEX_PAGE_SIZE, NUM_STAGES=config.num_stages, num_warps=config.num_warps,
        )  # fmt: skip

    ms = _ms_per_call(call, tables.shape[0], device)
    moved = batch * keys * (layout.bytes_per_token("bf16") + 4)
    return DecodeTiming("bf16", keys, batch, ms, moved / ms / 1e6)


@triton.jit
def empty_kernel(PDL: tl.constexpr):
    if PDL:
        gdc_wait()
        gdc_launch_dependents()


def launch_overhead_us(programs: int, pdl: bool, device: torch.device, calls: int = 64) -> float:
    """us per call of an empty kernel of `programs` programs, timed as decode is (CUDA-graph replays of
    `calls` calls): what a call costs before it reads a byte. 0 on a CPU."""
    if device.type != "cuda":
        return 0.0
    pdl = pdl and pdl_supported(device)
    extra = {"launch_pdl": True} if pdl else {}
    empty_kernel[(1, 1, programs)](PDL=pdl, **extra)
    torch.cuda.synchronize(device)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(calls):
            empty_kernel[(1, 1, programs)](PDL=pdl, **extra)
    return median_ms(graph.replay, device) / calls * 1e3


def decode_programs(keys: int, batch: int, config: LogitsConfig, device: torch.device) -> int:
    """Programs in the grid of a bf16 decode call (what `_logits_core.launch` launches)."""
    pages = keys // INDEX_PAGE_SIZE
    config = config.for_decode_call(pages * batch, _num_sms(device))
    return batch * triton.cdiv(pages, pages_per_program(pages, batch, False, config, device))


def bf16_matmul_tflops(device: torch.device, n: int = 8192) -> float:
    """The bf16 tensor-core ceiling as a large torch (cuBLAS) product on random data reaches it."""
    if device.type != "cuda":
        return float("nan")
    a = torch.randn(n, n, device=device, dtype=torch.bfloat16)
    b = torch.randn(n, n, device=device, dtype=torch.bfloat16)
    return 2 * n**3 / median_ms(lambda: a @ b, device, rep_ms=200) / 1e9


def prefill_flops(tokens: int, heads: int = HEADS) -> float:
    """The useful products of a causal prefill: each row's keys x heads x 128 x 2 (multiply, add)."""
    lens = (torch.arange(tokens, dtype=torch.float64) + 1) // 4
    return float(lens.sum()) * heads * HEAD_DIM * 2


@dataclass(frozen=True)
class PrefillMeasure:
    path: str  # "triton bf16", "triton fp8", "torch gather bf16"
    tokens: int  # prefill tokens (query rows); keys are tokens // 4
    ms: float | None
    peak_extra_bytes: int | None  # peak allocated during the call above what was allocated before it
    logits_bytes: int
    note: str = ""


@functools.lru_cache(maxsize=2)
def _prefill_inputs(kind: IndexKDtype, tokens: int, device: torch.device, seed: int):
    keys = tokens // 4
    pages = -(-keys // INDEX_PAGE_SIZE)
    pool = random_pool(kind, pages, device, seed)
    gen = torch.Generator(device=device).manual_seed(seed)
    q8, weights = random_queries(tokens, HEADS, gen, device)
    lens = ((torch.arange(tokens, device=device) + 1) // 4).to(torch.int32)  # causal, in compressed tokens
    table = torch.randperm(pages, generator=torch.Generator().manual_seed(seed)).to(device, torch.int32)[None]
    return pool, q8, weights, lens, table, keys


def _peak_extra(fn: Callable[[], object], device: torch.device) -> int | None:
    if device.type != "cuda":
        fn()
        return None
    torch.cuda.synchronize(device)
    torch.cuda.reset_peak_memory_stats(device)
    before = torch.cuda.memory_allocated(device)
    fn()
    torch.cuda.synchronize(device)
    return torch.cuda.max_memory_allocated(device) - before


def measure_prefill_kernel(
    kind: IndexKDtype, tokens: int, config: LogitsConfig, device: torch.device, seed: int
) -> PrefillMeasure:
    pool, q8, weights, lens, table, keys = _prefill_inputs(kind, tokens, device, seed)
    cu = torch.tensor([0, tokens], dtype=torch.int32, device=device)

    def run() -> torch.Tensor:
        return ragged_paged_mqa_logits(q8, pool, weights, lens, table, cu, tokens, keys, config=config)

    peak = _peak_extra(run, device)
    ms = median_ms(run, device, rep_ms=200)
    return PrefillMeasure(f"triton {kind}", tokens, ms, peak, tokens * keys * 4)


def gather_logits_torch(q8, pool, weights, lens, table, keys) -> torch.Tensor:
    """The first bf16 read path, kept lean: gather every row's pages into `[rows, pages, page_bytes]`
    (as SGLang's fp8_paged_mqa_logits_torch does), one bmm for q.k, ReLU in place, one bmm for the
    weighted head sum. The gathered tensor is what runs out of memory."""
    rows = q8.shape[0]
    gathered = pool[table.expand(rows, -1).long()]  # [rows, pages, page_bytes]
    kv = gathered.view(torch.bfloat16).view(rows, -1, 128)
    scores = torch.bmm(kv, q8.to(torch.bfloat16).transpose(1, 2)).relu_()  # [rows, pages * 64, H]
    del gathered, kv
    logits = torch.bmm(scores, weights.to(torch.bfloat16).unsqueeze(-1)).squeeze(-1).float()
    positions = torch.arange(logits.shape[1], device=logits.device)
    return logits.masked_fill_(positions[None, :] >= lens[:, None], 0.0)[:, :keys]


def measure_prefill_gather(tokens: int, device: torch.device, seed: int) -> PrefillMeasure:
    pool, q8, weights, lens, table, keys = _prefill_inputs("bf16", tokens, device, seed)
    gathered_bytes = tokens * table.shape[1] * pool.shape[1]
    try:
        peak = _peak_extra(lambda: gather_logits_torch(q8, pool, weights, lens, table, keys), device)
    except torch.OutOfMemoryError:
        return PrefillMeasure(
            "torch gather bf16", tokens, None, None, tokens * keys * 4,
            note=f"OOM: the gathered pages alone need {gathered_bytes / 2**30:.0f} GiB",
        )  # fmt: skip
    return PrefillMeasure("torch gather bf16", tokens, None, peak, tokens * keys * 4)
