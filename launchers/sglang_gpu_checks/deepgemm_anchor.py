"""This project's index-K kernels beside SGLang's production fp8 kernels (DeepGEMM) on the same bytes.

SGLang 0.5.23 runs DeepGEMM's `fp8_paged_mqa_logits` (decode) and `fp8_mqa_logits` (prefill, on keys
gathered out of the pool into contiguous `k_fp8 [N, 128]` and `k_scale [N]`) for fp8 index keys on
Hopper. Here they are called with the arguments SGLang passes (dsa_indexer.py): the pool viewed as
`[pages, 64, 1, 132]`, `context_lens [B, 1]` int32, the schedule from `get_paged_mqa_logits_metadata
(context_lens, 64, num_sms)`, `clean_logits=False`, and PDL on (SGLANG_DEEPGEMM_PDL defaults to 1).

Used by tests/benchmarks/bench_deepgemm_anchor.py (the H200 table in KERNELS.md) and by the GPU test
test_deepgemm_anchor_gpu.py. `deep_gemm` is optional: `load_deep_gemm()` says why it is unusable.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from types import ModuleType

import torch

from launchers.sglang.kernels import layout
from launchers.sglang.kernels import reference as ref
from launchers.sglang.kernels._logits_core import LogitsConfig, default_config, pages_per_program
from launchers.sglang.kernels.layout import HEAD_DIM, INDEX_PAGE_SIZE
from launchers.sglang.kernels.paged_logits import paged_mqa_logits
from launchers.sglang.kernels.ragged_logits import ragged_paged_mqa_logits
from launchers.sglang.kernels.store import store_index_k
from launchers.sglang_gpu_checks import kernel_bench as kb
from launchers.sglang_gpu_checks import kernel_checks as kc

DEEP_GEMM_CALLS = ("fp8_paged_mqa_logits", "get_paged_mqa_logits_metadata", "fp8_mqa_logits")


def load_deep_gemm() -> tuple[ModuleType | None, str]:
    """(deep_gemm, "") where it imports with the three index calls, else (None, why not)."""
    try:
        import deep_gemm
    except Exception as error:  # not installed, or a `_C` built against another torch (undefined symbol)
        first = str(error).splitlines()[0] if str(error) else ""
        return None, f"deep_gemm does not import: {type(error).__name__}: {first}"
    missing = [name for name in DEEP_GEMM_CALLS if not hasattr(deep_gemm, name)]
    if missing:
        return None, f"deep_gemm {getattr(deep_gemm, '__version__', '?')} lacks {', '.join(missing)}"
    if hasattr(deep_gemm, "set_pdl"):
        deep_gemm.set_pdl(True)  # as SGLang's update_deep_gemm_config does by default
    return deep_gemm, ""


def kv_view(pool: torch.Tensor) -> torch.Tensor:
    """The fp8 pool as SGLang hands it to DeepGEMM: `uint8 [pages, 64, 1, 132]`."""
    rows = layout.as_page_rows(pool)
    return rows.view(rows.shape[0], INDEX_PAGE_SIZE, 1, HEAD_DIM + layout.FP8_SCALE_BYTES)


def dg_paged_logits(dg, q8, pool, weights, lens_2d, table, schedule, max_len: int) -> torch.Tensor:
    """DeepGEMM decode logits `[B, max_len]` (entries past a row's length are not written)."""
    return dg.fp8_paged_mqa_logits(q8, kv_view(pool), weights, lens_2d, table, schedule, max_len, False)


def dg_schedule(dg, lens_2d: torch.Tensor) -> torch.Tensor:
    return dg.get_paged_mqa_logits_metadata(lens_2d, INDEX_PAGE_SIZE, dg.get_num_sms())


def gather_keys(pool: torch.Tensor, pages: torch.Tensor, n: int) -> tuple[torch.Tensor, torch.Tensor]:
    """One request's first `n` keys out of its pages as contiguous `(k_fp8 [n, 128], k_scale [n])`, what
    SGLang's `get_index_k_scale_buffer` hands to `fp8_mqa_logits` for a prefill."""
    rows = layout.as_page_rows(pool)[pages[: -(-n // INDEX_PAGE_SIZE)].long()]
    values = rows[:, : INDEX_PAGE_SIZE * HEAD_DIM].reshape(-1, HEAD_DIM)[:n].view(torch.float8_e4m3fn)
    scales = rows[:, INDEX_PAGE_SIZE * HEAD_DIM :].contiguous().view(torch.float32).reshape(-1)[:n]
    return values.contiguous(), scales.contiguous()


def bf16_copy_of(pool8: torch.Tensor) -> torch.Tensor:
    """A bf16 pool holding the same keys as an fp8 pool (values times scale, rounded to bf16)."""
    rows8 = layout.as_page_rows(pool8)
    pool16 = layout.new_pool(rows8.shape[0], "bf16", rows8.device)
    values16 = pool16.view(torch.bfloat16).view(-1, INDEX_PAGE_SIZE, HEAD_DIM)
    chunk = 1 << 14
    for start in range(0, rows8.shape[0], chunk):
        part = rows8[start : start + chunk]
        values = part[:, : INDEX_PAGE_SIZE * HEAD_DIM].view(torch.float8_e4m3fn).float()
        scales = part[:, INDEX_PAGE_SIZE * HEAD_DIM :].contiguous().view(torch.float32)
        values16[start : start + chunk] = (values.view(-1, INDEX_PAGE_SIZE, HEAD_DIM) * scales[..., None]).to(
            torch.bfloat16
        )
    return pool16


@dataclass(frozen=True)
class AnchorCheck:
    """This project's fp8 logits against DeepGEMM's on the same pool bytes, q and weights."""

    path: str  # "paged decode" or "ragged prefill"
    rows: int
    max_len: int
    dg_all_finite: bool  # DeepGEMM wrote a finite value at every position inside each row's length
    rel_err_ours_vs_dg: float  # max over rows of max|ours - dg| / max|dg|
    rel_err_dg_vs_stored: float  # DeepGEMM against fp64 math on the keys as stored
    rel_err_ours_vs_stored: float
    overlap: dict[int, float]  # index_topk -> mean over rows of |top-k(ours) & top-k(dg)| / k
    overlap_min: dict[int, float]


def _compare(path, ours, theirs, q8, weights, lens, stored_of_row, topks) -> AnchorCheck:
    finite, e_pair, e_dg, e_ours = True, 0.0, 0.0, 0.0
    overlaps: dict[int, list[float]] = {k: [] for k in topks}
    for r, n in enumerate(lens):
        a, b = ours[r, :n].double(), theirs[r, :n].double()
        finite &= bool(torch.isfinite(b).all())
        exact = ref.index_scores(q8[r : r + 1].float(), weights[r : r + 1], stored_of_row(r))[0]
        e_pair = max(e_pair, kc._rel_err(a, b))
        e_dg, e_ours = max(e_dg, kc._rel_err(b, exact)), max(e_ours, kc._rel_err(a, exact))
        for k in topks:
            overlaps[k].append(kc._overlap(a, b.nan_to_num(float("-inf")), k))
    return AnchorCheck(
        path, len(lens), max(lens), finite, e_pair, e_dg, e_ours,
        {k: sum(v) / len(v) for k, v in overlaps.items()}, {k: min(v) for k, v in overlaps.items()},
    )  # fmt: skip


def check_paged_against_dg(
    dg, lengths: list[int], topks: tuple[int, ...], seed: int, device: torch.device
) -> AnchorCheck:
    """Decode: one row per request over its own shuffled pages; keys stored by this project's fp8 store."""
    gen = torch.Generator(device=device).manual_seed(seed)
    table, num_pages = kc._pages_for(lengths, seed, device)
    pool = layout.new_pool(num_pages, "fp8", device)
    keys = [torch.randn(n, HEAD_DIM, generator=gen, device=device) for n in lengths]
    for b, n in enumerate(lengths):
        store_index_k(keys[b], ref.slots_of(table[b], n), pool)
    q8, weights = kc.random_queries(len(lengths), kb.HEADS, gen, device)
    max_len = max(lengths)
    lens_2d = torch.tensor(lengths, dtype=torch.int32, device=device).view(-1, 1)
    ours = torch.full((len(lengths), max_len), float("nan"), device=device)
    paged_mqa_logits(q8.unsqueeze(1), pool, weights, lens_2d, table, None, max_len, out=ours)
    theirs = dg_paged_logits(
        dg, q8.unsqueeze(1), pool, weights, lens_2d, table, dg_schedule(dg, lens_2d), max_len
    )
    stored = [ref.stored_precision(k, "fp8") for k in keys]
    return _compare("paged decode", ours, theirs, q8, weights, lengths, lambda r: stored[r], topks)


def check_ragged_against_dg(
    dg, context: int, rows: int, topks: tuple[int, ...], seed: int, device: torch.device
) -> AnchorCheck:
    """Prefill: `rows` query tokens of one request, row t sees the first `context - rows + t + 1` keys;
    DeepGEMM reads them gathered (ks = 0, ke = row length), ours straight from the pages."""
    gen = torch.Generator(device=device).manual_seed(seed)
    table, num_pages = kc._pages_for([context], seed, device)
    pool = layout.new_pool(num_pages, "fp8", device)
    keys = torch.randn(context, HEAD_DIM, generator=gen, device=device)
    store_index_k(keys, ref.slots_of(table[0], context), pool)
    q8, weights = kc.random_queries(rows, kb.HEADS, gen, device)
    lens = [context - rows + t + 1 for t in range(rows)]
    seq_lens = torch.tensor(lens, dtype=torch.int32, device=device)
    cu = torch.tensor([0, rows], dtype=torch.int32, device=device)
    ours = torch.full((rows, context), float("nan"), device=device)
    ragged_paged_mqa_logits(q8, pool, weights, seq_lens, table, cu, rows, context, out=ours)
    k8, k_scale = gather_keys(pool, table[0], context)
    theirs = dg.fp8_mqa_logits(q8, (k8, k_scale), weights, torch.zeros_like(seq_lens), seq_lens, False)
    stored = ref.stored_precision(keys, "fp8")
    return _compare("ragged prefill", ours, theirs, q8, weights, lens, lambda r: stored[: lens[r]], topks)


def time_decode_dg(
    dg,
    pool8: torch.Tensor,
    keys: int,
    batch: int,
    device: torch.device,
    rotation_bytes: int = kb.ROTATION_BYTES,
) -> kb.DecodeTiming:
    """DeepGEMM decode timed exactly as `kernel_bench.time_decode` times ours: the same page tables, q and
    weights, CUDA-graph replays of calls on disjoint pages. The schedule is made once outside the graph,
    as SGLang makes it once per step for all layers."""
    tables = kb._decode_tables(pool8, keys, batch, device, rotation_bytes)
    q8, weights = kc.random_queries(
        batch, kb.HEADS, torch.Generator(device=device).manual_seed(keys + batch), device
    )
    q8 = q8.unsqueeze(1)
    lens_2d = torch.full((batch, 1), keys, dtype=torch.int32, device=device)
    schedule, kv = dg_schedule(dg, lens_2d), kv_view(pool8)

    def call(i: int) -> None:
        dg.fp8_paged_mqa_logits(q8, kv, weights, lens_2d, tables[i], schedule, keys, False)

    ms = kb._ms_per_call(call, tables.shape[0], device)
    moved = batch * keys * (layout.bytes_per_token("fp8") + 4)
    return kb.DecodeTiming("fp8", keys, batch, ms, moved / ms / 1e6)


def decode_row(
    dg, pools: dict, keys: int, batch: int, bf16_config: LogitsConfig, device: torch.device
) -> dict:
    """One decode shape: DeepGEMM fp8, this project's fp8 (tuned) and bf16 (`bf16_config`), same inputs."""
    row: dict = {"keys": keys, "batch": batch}
    row["dg"] = time_decode_dg(dg, pools["fp8"], keys, batch, device)
    row["fp8"] = kb.time_decode("fp8", pools["fp8"], keys, batch, default_config("fp8", False), device)
    row["bf16"] = kb.time_decode("bf16", pools["bf16"], keys, batch, bf16_config, device)
    return {k: ({"ms": v.ms, "gbs": v.gbs} if isinstance(v, kb.DecodeTiming) else v) for k, v in row.items()}


# what each decode column moves per key: pool bytes + 4 logits bytes
_KIND_OF_COLUMN = {"dg": "fp8", "fp8": "fp8", "bf16": "bf16"}


def streaming_fit(decode_rows: list[dict], column: str, min_keys: int = 131072, min_batch: int = 16) -> dict:
    """Least-squares `time = fixed + bytes / rate` over the large decode calls (from `min_keys` keys and
    `min_batch` requests) of one column ("dg", "fp8" or "bf16"): splits a share of copy bandwidth into a
    per-call cost and the rate at which the kernel streams once running. `{fixed_us, rate_gbs, r2, points}`."""
    from scipy.stats import linregress

    rows = [r for r in decode_rows if r["keys"] >= min_keys and r["batch"] >= min_batch]
    if len(rows) < 2:
        raise ValueError(f"a fit needs two decode calls from {min_keys} keys x {min_batch} requests")
    per_key = layout.bytes_per_token(_KIND_OF_COLUMN[column]) + 4
    fit = linregress([r["keys"] * r["batch"] * per_key for r in rows], [r[column]["ms"] / 1e3 for r in rows])
    return {
        "fixed_us": float(fit.intercept) * 1e6,
        "rate_gbs": 1 / float(fit.slope) / 1e9,
        "r2": float(fit.rvalue) ** 2,
        "points": len(rows),
    }


def fixed_shape(base: LogitsConfig, **changes) -> LogitsConfig:
    """`base` with `changes`, launched at every call size alike (no large-call stages or cap)."""
    return dataclasses.replace(base, large_call_stages=None, large_call_max_pages=None, **changes)


def bf16_split_sweep(
    pool16: torch.Tensor,
    points: list[tuple[int, int]],
    base: LogitsConfig,
    caps: tuple[int, ...],
    stages: tuple[int, ...],
    device: torch.device,
) -> list[dict]:
    """bf16 decode at `points` with the tuned small-call shape but other caps on pages per program (how
    finely a large call is cut into programs), pipeline depths and even or capped splits, each fixed:
    `[{max_pages, stages, even_splits, programs: [per point], ms: [per point]}]`. Where even splits do
    not change the grid the row repeats the uneven one: the pair shows the run's timing noise."""
    rows = []
    for n_stages in stages:
        for cap in caps:
            for even in (False, True):
                cfg = fixed_shape(base, max_pages_per_program=cap, num_stages=n_stages, even_splits=even)
                programs, times = [], []
                for keys, batch in points:
                    pages = keys // INDEX_PAGE_SIZE
                    per_program = pages_per_program(pages, batch, False, cfg, device)
                    programs.append(batch * -(-pages // per_program))
                    times.append(kb.time_decode("bf16", pool16, keys, batch, cfg, device).ms)
                rows.append(
                    {
                        "max_pages": cap,
                        "stages": n_stages,
                        "even_splits": even,
                        "programs": programs,
                        "ms": times,
                    }
                )
    return rows


def prefill_rows(dg, tokens: int, device: torch.device, seed: int, rep_ms: int = 500) -> dict:
    """One causal prefill of `tokens` query rows over `tokens // 4` keys (the C4 indexer), all three
    kernels on the same keys: ours read the pages, DeepGEMM reads them gathered (gather timed apart)."""
    keys = tokens // 4
    pages = -(-keys // INDEX_PAGE_SIZE)
    pool8 = kb.random_pool("fp8", pages, device, seed)
    pool16 = bf16_copy_of(pool8)
    q8, weights = kc.random_queries(
        tokens, kb.HEADS, torch.Generator(device=device).manual_seed(seed), device
    )
    lens = ((torch.arange(tokens, device=device) + 1) // 4).to(torch.int32)
    table = torch.randperm(pages, generator=torch.Generator().manual_seed(seed)).to(device, torch.int32)[None]
    cu = torch.tensor([0, tokens], dtype=torch.int32, device=device)
    out = {"tokens": tokens, "keys": keys}
    for kind, pool in (("fp8", pool8), ("bf16", pool16)):
        cfg = default_config(kind, True)
        out[kind] = kb.median_ms(
            lambda p=pool, c=cfg: ragged_paged_mqa_logits(q8, p, weights, lens, table, cu, tokens, keys, config=c),
            device, rep_ms,
        )  # fmt: skip
    out["gather"] = kb.median_ms(lambda: gather_keys(pool8, table[0], keys), device, 50)
    k8, k_scale = gather_keys(pool8, table[0], keys)
    starts = torch.zeros_like(lens)
    out["dg"] = kb.median_ms(
        lambda: dg.fp8_mqa_logits(q8, (k8, k_scale), weights, starts, lens, False), device, rep_ms
    )
    return out
