"""The bf16 index-K patch run inside SGLang 0.5.23's own DeepSeek-V4 code, fp8 beside it; one table.

    python -m launchers.sglang_gpu_checks.validate_on_gpu --sglang [--md out.md] [--json out.json] [--jit]

For each index-K precision (fp8 as SGLang ships, bf16 with the patch applied to SGLang's modules):
1. planner vs configurator: `launchers.planner` KV slots against SGLang's `DSV4PoolConfigurator` for
   DeepSeek-V4-Flash at mem-fraction 0.85 / 0.80 and context 524,288 / 131,072 on this GPU's memory;
2. pool: SGLang's `DeepSeekV4TokenToKVPool`, sized by that configurator for a 2-layer DeepSeek-V4-shaped
   model, its indexer pool's bytes per token and what it allocates against the budget;
3. store: keys written through `compressor_v2.compress_norm_rope_store` (the name SGLang's compressor
   calls), with SGLang's `CompressorPrefillPlan` rows;
4. indexer: SGLang's `C4IndexerBackendMixin.forward_c4_indexer` with a random-weight `C4Indexer` (64 heads
   x 128, index_topk 512, page 256 / 64), decode and a 22.6K-token prefill; the selected slots against the
   top-k of fp32 math on the unquantized keys, and the prefill's peak memory against the planner's
   figure for the logits. `sglang_harness.STAND_INS` lists what is not SGLang's own, and why.
Exit status 1 if any check fails. `--quick` runs tiny sizes (on a CPU, kernels in Triton's interpreter).
"""

from __future__ import annotations

import dataclasses
import datetime
import functools
import platform
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

import torch

from launchers.planner import (
    DEFAULT_GPU_MEM_GIB,
    DEFAULT_MEM_FRACTION,
    GIB,
    indexer_logits_bytes,
    make_plan,
    max_running_requests_arg,
)
from launchers.sglang.kernels.layout import INDEX_PAGE_SIZE, bytes_per_token
from launchers.sglang.kernels.store import norm_rope_hadamard_store
from launchers.sglang_gpu_checks import sglang_harness as harness
from recall_eval.types import Profile

INDEXER = "sglang.srt.layers.attention.dsv4.indexer"
COMPRESSOR = "sglang.srt.layers.attention.dsv4.compressor_v2"
KINDS = ("fp8", "bf16")
OVERLAP_TARGET = 0.99
INDEX_PADDING_PAGES = (
    8  # the index pool's logical page of slack (page_size / 4 slots = 1 page) and its pad page
)

FULL = {
    "pool_budget": 2 << 30,
    "decode_lens": [131072 - 37, 65536, 40000, 9000, 4096 + 17, 600, 300, 1],
    "prefill_tokens": {"bf16": 22600, "fp8": 4096},  # fp8's torch fallback gathers every row's pages
    "topk": 512,
    "store_chunk": 16384,
}
QUICK = {
    "pool_budget": 512 << 20,
    "decode_lens": [300, 130, 69, 1],
    "prefill_tokens": {"bf16": 384, "fp8": 256},
    "topk": 32,
    "store_chunk": 100,
}


@dataclass(frozen=True)
class Check:
    section: str
    item: str
    value: str
    target: str
    ok: bool | None  # None: reported, not checked


@dataclass
class IndexerRun:
    kind: str
    mode: str
    rows: int
    max_len: int
    overlap_mean: float
    overlap_min: float
    peak_bytes: int | None  # whole forward_c4_indexer, beyond what existed before
    logits_peak_bytes: int | None  # inside the logits call alone
    gather_bytes: int  # what a [queries, pages, 64 x 128] bf16 gather of the pages would take
    seconds: float
    logits_fn: str = ""


@dataclass
class Result:
    device: str
    gpu_mem_gib: float
    versions: dict[str, str]
    checks: list[Check] = field(default_factory=list)
    runs: list[IndexerRun] = field(default_factory=list)
    executed: list[str] = field(default_factory=list)
    stand_ins: list[tuple[str, str, str]] = field(default_factory=list)


# --- 1. planner vs configurator -----------------------------------------------------------------------


def kv_slots(
    profile: Profile, config_dir: Path, kind: str, context: int, gpu_mem_gib: float
) -> tuple[int, int, int]:
    """KV slots for `kind` index keys from one profile, the planner's and SGLang's configurator's on the
    same budget (its mem fraction and --max-running-requests go to both), and the request slots SGLang
    resolved. Call inside harness.patch_state(kind)."""
    fraction = profile.mem_fraction_static or DEFAULT_MEM_FRACTION
    requests = max_running_requests_arg(profile.name, profile.extra_args)
    setup = harness.resolve(config_dir, fraction, context, requests)
    sglang = setup.pool_sizes(int(gpu_mem_gib * fraction * GIB)).max_total_num_tokens
    plan = make_plan(profile, context_length=context, gpu_mem_gib=gpu_mem_gib, weights_gib=0.0)
    ours = next(row.max_tokens for row in plan.rows if row.dtype == kind)
    return ours, sglang, setup.max_running_requests


def configurator_checks(gpu_mem_gib: float) -> list[Check]:
    from launchers.profiles import load_profiles

    profile = load_profiles()["dsv4-flash"]
    flash = harness.temp_config_dir()
    checks = []
    for kind in KINDS:
        with harness.patch_state(kind):
            for fraction in (0.85, 0.80):
                for context in (524288, 131072):
                    ours, sglang, _ = kv_slots(
                        profile.model_copy(update={"mem_fraction_static": fraction}),
                        flash,
                        kind,
                        context,
                        gpu_mem_gib,
                    )
                    checks.append(
                        Check(
                            "planner vs SGLang configurator",
                            f"{kind} KV slots, mem-fraction {fraction:.2f}, context {context:,}",
                            f"{ours:,} vs {sglang:,}",
                            "equal",
                            ours == sglang,
                        )
                    )
    return checks


# --- 2. pool --------------------------------------------------------------------------------------------


def _allocated(device: torch.device) -> int | None:
    return torch.cuda.memory_allocated(device) if device.type == "cuda" else None


def build_pool(kind: str, setup: harness.Setup, budget: int, device: torch.device) -> tuple[Any, list[Check]]:
    sizes = setup.pool_sizes(budget)
    before = _allocated(device)
    pool = setup.build_pool(sizes, str(device))
    after = _allocated(device)
    indexer_pool = pool.c4_indexer_kv_pool
    buffer = pool.get_index_k_with_scale_buffer(0)
    per_token = buffer.shape[1] // indexer_pool.page_size
    want = bytes_per_token(kind)  # 256 bf16, 132 fp8 (128 e4m3 + one fp32 scale)
    checks = [
        Check(
            "pool",
            f"{kind} DeepSeekV4IndexerPool bytes per compressed token",
            f"{per_token} (page {buffer.shape[1]} B = {indexer_pool.page_size} x {per_token}, no padding)",
            str(want),
            per_token == want and indexer_pool.get_bytes_per_token() == want,
        ),
        Check(
            "pool",
            f"{kind} pool from the configurator ({budget / GIB:.2f} GiB budget)",
            f"full {sizes.full_max_total_num_tokens:,} tokens, c4 {sizes.c4_max_total_num_tokens:,}, "
            f"{buffer.shape[0]:,} index pages",
            "",
            None,
        ),
    ]
    # the configurator budgets c4 tokens x the (patched) key bytes; the pool adds SGLang's padding pages
    import importlib

    configurator = importlib.import_module("sglang.srt.model_executor.pool_configurator")
    index_budget = sizes.c4_max_total_num_tokens * configurator.get_dsv4_indexer_bytes_per_token(128, False)
    index_alloc = buffer.numel() * buffer.element_size()
    extra_pages = (index_alloc - index_budget) / buffer.shape[1]
    checks.append(
        Check(
            "pool",
            f"{kind} index pool allocated vs the configurator's index budget",
            f"{index_alloc / 2**20:.2f} MiB vs {index_budget / 2**20:.2f} MiB ({extra_pages:+.0f} pages)",
            f"0 to +{INDEX_PADDING_PAGES} pages (SGLang's padding pages)",
            0 <= extra_pages <= INDEX_PADDING_PAGES,
        )
    )
    if before is not None and after is not None:
        used = after - before
        checks.append(
            Check(
                "pool",
                f"{kind} whole pool allocated vs the configurator's budget",
                f"{used / GIB:.3f} GiB of {budget / GIB:.3f} GiB ({used / budget:.1%})",
                "reported: SGLang pads pages its DSv4 configurator does not count, for fp8 as for bf16",
                None,
            )
        )
    return pool, checks


# --- 3. keys through SGLang's compressor store ------------------------------------------------------------


@dataclass
class Keys:
    """One request's keys: fp32 reference values and the pool slots they were stored at."""

    exact: torch.Tensor  # [n, 128] fp32, the epilogue's output before storage
    slots: torch.Tensor  # [n] int64 pool slots
    table: torch.Tensor  # [pages] int32 page table row


def _freqs(max_pos: int, gen: torch.Generator, device: torch.device) -> torch.Tensor:
    angles = torch.rand(max_pos, 32, generator=gen, device=device) * 6.2832
    return torch.polar(torch.ones_like(angles), angles)  # complex [max_pos, 32], as the model holds freqs_cis


def store_request_keys(
    kind: str,
    lens: list[int],
    buffer: torch.Tensor,
    freqs: torch.Tensor,
    sizes: dict,
    jit: bool,
    device: torch.device,
    seed: int,
) -> list[Keys]:
    """Random compressed rows for each request, normed/roped/rotated and stored by the compressor's store
    entry (`compressor_v2.compress_norm_rope_store`, the patched one for bf16) at shuffled distinct pages."""
    import importlib

    from launchers.sglang.kernels import reference as ref

    compressor = importlib.import_module(COMPRESSOR)
    compress = importlib.import_module("sglang.kernels.ops.attention.dsv4.compress")
    gen = torch.Generator(device=device).manual_seed(seed)
    counts = [-(-n // INDEX_PAGE_SIZE) for n in lens]
    if sum(counts) + 1 > buffer.shape[0]:
        raise RuntimeError(f"the pool has {buffer.shape[0]} index pages, the requests need {sum(counts) + 1}")
    order = torch.randperm(buffer.shape[0] - 1, generator=torch.Generator().manual_seed(seed)).to(device) + 1
    norm_weight = (
        torch.rand(128, generator=gen, device=device) + 0.5
    )  # fp32, as the compressor's RMSNorm keeps it
    freqs_real = torch.view_as_real(freqs).flatten(-2).float()
    out, start = [], 0
    for n, pages in zip(lens, counts, strict=True):
        table = order[start : start + pages].int()
        start += pages
        idx = torch.arange(n, device=device)
        slots = table.long()[idx // INDEX_PAGE_SIZE] * INDEX_PAGE_SIZE + idx % INDEX_PAGE_SIZE
        kv = (torch.randn(n, 128, generator=gen, device=device) * 2).bfloat16()
        positions = idx * 4  # a C4 key covers 4 tokens; its RoPE position is seq_len - 4
        exact = ref.norm_rope_hadamard(kv, norm_weight.bfloat16(), 1e-6, freqs_real, positions).float()
        for lo in range(0, n, sizes["store_chunk"]):
            hi = min(n, lo + sizes["store_chunk"])
            words = torch.zeros(hi - lo, 4, dtype=torch.int32, device=device)
            words[:, 0] = (positions[lo:hi] + 4).int()  # seq_len after this key's 4 tokens
            words[:, 1] = torch.arange(hi - lo, device=device, dtype=torch.int32)  # ragged id -> out_loc
            plan = compress.CompressorPrefillPlan(
                4,
                words.view(torch.uint8).view(-1, 16),
                torch.zeros(hi - lo, 8, dtype=torch.uint8, device=device),
            )
            kwargs = dict(
                norm_weight=norm_weight, norm_eps=1e-6, freq_cis=freqs, out_loc=slots[lo:hi],
                kvcache=buffer.view(torch.uint8), page_size=INDEX_PAGE_SIZE, use_fp4=False, bf16_store=False,
            )  # fmt: skip
            if kind == "bf16" or jit:
                compressor.compress_norm_rope_store(kv[lo:hi], plan, **kwargs)
            else:  # stand-in for SGLang's JIT fused store: same bytes (STAND_INS)
                norm_rope_hadamard_store(
                    kv[lo:hi], plan[1], is_decode=False, compress_ratio=4, norm_weight=norm_weight.bfloat16(),
                    eps=1e-6, freqs_real=freqs_real, out_loc=slots[lo:hi], pool=buffer,
                )  # fmt: skip
        out.append(Keys(exact, slots, table))
    return out


# --- 4. the indexer -----------------------------------------------------------------------------------------


def _backend_class(indexer_mod: ModuleType) -> type:
    class Backend(indexer_mod.C4IndexerBackendMixin):
        """Holds what the DeepSeek-V4 attention backend holds for the indexer; records q and weights."""

        def __init__(self, pool: Any, metadata: Any) -> None:
            super().__init__()
            from sglang.srt.layers.attention.dsa.dsa_topk_backend import DSATopKBackend

            self.token_to_kv_pool = pool
            self.forward_metadata = metadata
            self.hisparse_coordinator = None
            self.dsa_topk_backend = DSATopKBackend.TORCH
            self.seen: dict[str, torch.Tensor] = {}

        def _forward_prepare_normal(self, **kwargs: Any):  # type: ignore[override]
            q, weights = super()._forward_prepare_normal(**kwargs)
            self.seen["q"], self.seen["weights"] = q, weights
            return q, weights

    return Backend


def make_indexer(setup: harness.Setup, freqs: torch.Tensor, device: torch.device, seed: int) -> Any:
    """SGLang's C4Indexer (wq_b, weights_proj, its Compressor) with random weights, on `device`."""
    import importlib

    indexer_mod = importlib.import_module(INDEXER)
    module = indexer_mod.C4Indexer(setup.model_config.hf_config, 0, freqs)
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for param in module.parameters():
            fan_in = param.shape[-1] if param.dim() > 1 else 1
            param.copy_(torch.randn(param.shape, generator=gen) / fan_in**0.5)
    return module.to(device)


def _peak_meter(device: torch.device) -> tuple[Callable[[], None], Callable[[], int | None]]:
    if device.type != "cuda":
        return (lambda: None), (lambda: None)
    base = {}

    def start() -> None:
        torch.cuda.synchronize(device)
        torch.cuda.reset_peak_memory_stats(device)
        base["at"] = torch.cuda.memory_allocated(device)

    def peak() -> int:
        torch.cuda.synchronize(device)
        return torch.cuda.max_memory_allocated(device) - base["at"]

    return start, peak


class _LogitsPeak:
    """Wraps the logits function the indexer calls (a module global) to measure its peak alone."""

    def __init__(self, device: torch.device):
        self.device = device
        self.peak: int | None = None
        self.name = ""

    def wrap(self, fn: Callable[..., torch.Tensor]) -> Callable[..., torch.Tensor]:
        start, peak = _peak_meter(self.device)

        @functools.wraps(fn)
        def measured(*args: Any, **kwargs: Any) -> torch.Tensor:
            start()
            out = fn(*args, **kwargs)
            got = peak()
            self.name = fn.__name__
            if got is not None:
                self.peak = max(self.peak or 0, got)
            return out

        return measured


def _overlaps(
    selected: torch.Tensor,
    q8: torch.Tensor,
    weights: torch.Tensor,
    row_keys: list[tuple[Keys, int]],
    topk: int,
    slot_to_key: torch.Tensor,
    chunk: int = 128,
) -> list[float]:
    """|selected & top-k of fp32 math on the unquantized keys| / min(topk, length), per row with a key.
    Rows that read the same request's keys are scored together, `chunk` at a time."""
    torch.backends.cuda.matmul.allow_tf32 = False  # fp32 means fp32
    out: list[float] = []
    r = 0
    while r < len(row_keys):
        keys = row_keys[r][0]
        end = r + 1
        while end < len(row_keys) and end - r < chunk and row_keys[end][0] is keys:
            end += 1
        lens = torch.tensor([n for _, n in row_keys[r:end]], device=q8.device)
        width = int(lens.max())
        if width == 0:  # the first tokens of a prefill see no complete compressed key
            r = end
            continue
        dots = torch.einsum("chd,sd->chs", q8[r:end].float(), keys.exact[:width])
        scores = (dots.clamp_min(0) * weights[r:end].float().unsqueeze(-1)).sum(1)  # [c, width]
        cols = torch.arange(width, device=q8.device)
        scores = scores.masked_fill(cols[None, :] >= lens[:, None], float("-inf"))
        want_k = lens.clamp(max=topk)
        best = scores.topk(min(topk, width), dim=1).indices  # sorted: a row's first want_k are its top-k
        keep = torch.arange(best.shape[1], device=q8.device)[None, :] < want_k[:, None]
        wanted = torch.zeros(end - r, width + 1, dtype=torch.bool, device=q8.device)
        wanted.scatter_(1, best.masked_fill(~keep, width), True)
        got = slot_to_key[selected[r:end].long().clamp(min=0)].masked_fill(selected[r:end] < 0, -1)
        hits = wanted.gather(1, got.clamp(min=0).masked_fill(got < 0, width)) & (got >= 0)
        for row_hits, k in zip(hits.sum(1).tolist(), want_k.tolist(), strict=True):
            if k > 0:
                out.append(row_hits / k)
        r = end
    return out


def run_indexer(
    kind: str,
    mode: str,
    setup: harness.Setup,
    pool: Any,
    indexer: Any,
    requests: list[Keys],
    lens: list[int],
    freqs: torch.Tensor,
    topk: int,
    device: torch.device,
    seed: int,
) -> IndexerRun:
    """One forward of SGLang's forward_c4_indexer (patched for bf16): decode (one query row per request)
    or an eager prefill of one request (one row per token, causal)."""
    import importlib

    from sglang.srt.layers.attention.dsv4.metadata import PagedIndexerMetadata

    indexer_mod = importlib.import_module(INDEXER)
    gen = torch.Generator(device=device).manual_seed(seed)
    if mode == "decode":
        c4_lens = lens
        row_keys = list(zip(requests, lens, strict=True))
        tables = torch.zeros(
            len(lens), max(r.table.numel() for r in requests), dtype=torch.int32, device=device
        )
        for b, r in enumerate(requests):
            tables[b, : r.table.numel()] = r.table
        positions = torch.tensor([4 * n + 3 for n in lens], device=device)
        forward_mode, extend_lens = indexer_mod.ForwardMode.DECODE, None
    else:
        tokens = lens[0] * 4
        c4_lens = [(t + 1) // 4 for t in range(tokens)]  # keys complete before (and with) token t
        row_keys = [(requests[0], n) for n in c4_lens]
        tables = requests[0].table[None, :].expand(tokens, -1).contiguous()
        positions = torch.arange(tokens, device=device)
        forward_mode, extend_lens = indexer_mod.ForwardMode.EXTEND, [tokens]
    rows = len(c4_lens)
    seq_lens = torch.tensor(c4_lens, dtype=torch.int32, device=device)
    metadata = type("Metadata", (), {})()
    metadata.indexer_metadata = PagedIndexerMetadata(
        page_size=setup.page_size, compressed_page_size=INDEX_PAGE_SIZE, page_table=tables,
        compressed_seq_lens=seq_lens, use_topk_v2=False,
    )  # fmt: skip
    metadata.core_metadata = type("Core", (), {})()
    metadata.core_metadata.positions = positions
    metadata.core_metadata.c4_sparse_page_indices = torch.full(
        (rows, topk), -7, dtype=torch.int32, device=device
    )
    metadata.core_metadata.c4_sparse_raw_indices = None
    backend = _backend_class(indexer_mod)(pool, metadata)
    batch = type("Batch", (), {})()
    batch.forward_mode, batch.extend_seq_lens_cpu, batch.batch_size = forward_mode, extend_lens, len(lens)
    batch._original_forward_mode = batch.tbo_parent_token_range = None
    hidden = setup.model_config.hf_config.hidden_size
    x = torch.randn(rows, hidden, generator=gen, device=device).bfloat16()
    q_lora = torch.randn(
        rows, setup.model_config.hf_config.q_lora_rank, generator=gen, device=device
    ).bfloat16()

    meter = _LogitsPeak(device)
    bf16_indexer = importlib.import_module("launchers.sglang.bf16_indexer")
    wrapped = {  # module globals the two paths call for their logits
        (bf16_indexer, "paged_mqa_logits"),
        (bf16_indexer, "ragged_paged_mqa_logits"),
        (indexer_mod, "fp8_paged_mqa_logits_torch"),
    }
    originals = {(m, n): getattr(m, n) for m, n in wrapped}
    for (m, n), fn in originals.items():
        setattr(m, n, meter.wrap(fn))
    start, peak = _peak_meter(device)
    try:
        start()
        began = time.perf_counter()
        with torch.no_grad():
            backend.forward_c4_indexer(x, q_lora, indexer, batch, skip_compressor=True)
        whole = peak()
        seconds = time.perf_counter() - began
    finally:
        for (m, n), fn in originals.items():
            setattr(m, n, fn)
    selected = metadata.core_metadata.c4_sparse_page_indices
    slot_to_key = torch.full(
        (pool.get_index_k_with_scale_buffer(0).shape[0] * INDEX_PAGE_SIZE,), -1, device=device
    )
    for r in requests:
        slot_to_key[r.slots] = torch.arange(r.slots.numel(), device=device)
    weights = backend.seen["weights"].squeeze(-1)
    overlaps = _overlaps(selected, backend.seen["q"], weights, row_keys, topk, slot_to_key)
    pages = tables.shape[1]
    return IndexerRun(
        kind, mode, rows, max(c4_lens), sum(overlaps) / len(overlaps), min(overlaps), whole, meter.peak,
        rows * pages * INDEX_PAGE_SIZE * 128 * 2, seconds, meter.name,
    )  # fmt: skip


def indexer_checks(run: IndexerRun, topk: int) -> list[Check]:
    label = f"{run.kind} {run.mode} ({run.rows:,} query rows, up to {run.max_len:,} keys, top-{topk})"
    checks = [
        Check(
            "indexer",
            f"{label}: selections vs fp32 top-k, mean / min overlap",
            f"{run.overlap_mean:.4f} / {run.overlap_min:.4f}",
            f">= {OVERLAP_TARGET}" if run.kind == "bf16" else "reported",
            run.overlap_mean >= OVERLAP_TARGET if run.kind == "bf16" else None,
        )
    ]
    if run.peak_bytes is not None and run.mode == "prefill":
        figure = indexer_logits_bytes(run.rows)
        logits_ok = run.logits_peak_bytes is not None and run.logits_peak_bytes <= figure
        checks.append(
            Check(
                "indexer",
                f"{label}: peak memory of the logits call ({run.logits_fn}) vs the planner's logits figure",
                f"{(run.logits_peak_bytes or 0) / GIB:.3f} GiB vs {figure / GIB:.3f} GiB",
                "<= planner" if run.kind == "bf16" else "reported",
                logits_ok if run.kind == "bf16" else None,
            )
        )
        logits_peak = run.logits_peak_bytes or 0
        checks.append(
            Check(
                "indexer",
                f"{label}: logits-call peak vs a [queries, pages, 8192] bf16 gather (whole forward: "
                f"{run.peak_bytes / GIB:.3f} GiB)",
                f"{logits_peak / GIB:.3f} GiB vs gather {run.gather_bytes / GIB:.3f} GiB",
                "< gather / 4" if run.kind == "bf16" else "reported",
                logits_peak < run.gather_bytes / 4 if run.kind == "bf16" else None,
            )
        )
    return checks


# --- the whole run -------------------------------------------------------------------------------------------


def executed_functions(kind: str, jit: bool) -> list[str]:
    """SGLang functions that run for real in this validation (bf16: with the patch's replacements)."""
    names = [
        "server_args.ServerArgs.resolve_once (DeepSeek-V4 overrides: page 256, fp8 KV, 256 requests)",
        "configs.model_config.ModelConfig.from_server_args",
        "model_executor.pool_configurator.DSV4PoolConfigurator (calculate_pool_sizes, finalize)",
        "mem_cache.deepseek_v4_memory_pool.DeepSeekV4TokenToKVPool / DeepSeekV4IndexerPool",
        "layers.attention.dsv4.indexer.C4Indexer (wq_b, weights_proj: ReplicatedLinear; compute_weights, compute_q)",
        "layers.attention.dsv4.indexer.C4IndexerBackendMixin._forward_prepare_normal",
        "layers.attention.dsv4.metadata.PagedIndexerMetadata",
        "layers.attention.dsv4.indexer.topk_transform_pytorch_vectorized (DSATopKBackend.TORCH)",
    ]
    if kind == "bf16":
        names += [
            "patched: get_dsv4_indexer_bytes_per_token (pool and configurator), DeepSeekV4IndexerPool._create_buffer",
            "patched: compressor_v2.compress_norm_rope_store -> Triton norm_rope_hadamard_store (bf16)",
            "patched: C4IndexerBackendMixin.forward_c4_indexer -> paged_mqa_logits (decode) / "
            "ragged_paged_mqa_logits (prefill)",
        ]
    else:
        names += [
            "C4IndexerBackendMixin.forward_c4_indexer (as shipped) -> indexer.fp8_paged_mqa_logits_torch",
        ]
        if jit:
            names.append("compressor_v2.compress_norm_rope_store -> SGLang's JIT fused_norm_rope_v2 (fp8)")
    if jit:
        names.append("kernels.ops.attention.dsv4.fused_q_indexer_rope_hadamard_quant (JIT CUDA)")
    return names


def run(quick: bool = False, jit: bool = False, device: torch.device | None = None) -> Result:
    import importlib

    import sglang
    import triton

    from launchers.sglang import sgl_kernel_placeholder

    placeholder = torch.cuda.is_available() and sgl_kernel_placeholder.install_if_needed()
    device = device or torch.device("cuda" if torch.cuda.is_available() else "cpu")
    sizes = QUICK if quick else FULL
    if device.type == "cuda":
        gpu_mem_gib = torch.cuda.get_device_properties(device).total_memory / GIB
        name = torch.cuda.get_device_name(device)
    else:
        gpu_mem_gib, name = DEFAULT_GPU_MEM_GIB, f"CPU ({platform.processor() or platform.machine()})"
    result = Result(
        name, gpu_mem_gib,
        {"sglang": sglang.__version__, "torch": torch.__version__, "triton": triton.__version__,
         "python": platform.python_version(),
         "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")},
    )  # fmt: skip
    started = time.perf_counter()

    def progress(what: str) -> None:
        print(f"[{time.perf_counter() - started:6.1f} s] {what}", flush=True)

    result.checks += configurator_checks(gpu_mem_gib)
    progress("planner vs configurator done")
    small = harness.temp_config_dir(layers=2)
    result.stand_ins = [s for s in harness.STAND_INS if not (jit and s[0] in harness.JIT_REPLACED)]
    indexer_mod = importlib.import_module(INDEXER)
    for i, kind in enumerate(KINDS):
        with harness.patch_state(kind), harness.env(harness.TORCH_LOGITS_ENV, "1"):
            setup = harness.resolve(small, 0.85, 131072)
            pool, checks = build_pool(kind, setup, sizes["pool_budget"], device)
            result.checks += checks
            freqs = _freqs(1 << 20, torch.Generator(device=device).manual_seed(7), device)
            indexer = make_indexer(setup, freqs, device, 11)
            original_q = indexer_mod.fused_q_indexer_rope_hadamard_quant
            if not jit:
                indexer_mod.fused_q_indexer_rope_hadamard_quant = harness.fused_q_standin
            try:
                buffer = pool.get_index_k_with_scale_buffer(0)
                decode_keys = store_request_keys(
                    kind, sizes["decode_lens"], buffer, freqs, sizes, jit, device, 100 + i
                )
                progress(f"{kind}: pool built, decode keys stored")
                run_ = run_indexer(kind, "decode", setup, pool, indexer, decode_keys, sizes["decode_lens"],
                                   freqs, sizes["topk"], device, 200 + i)  # fmt: skip
                result.runs.append(run_)
                result.checks += indexer_checks(run_, sizes["topk"])
                progress(f"{kind}: decode done ({run_.overlap_mean:.4f})")
                tokens = sizes["prefill_tokens"][kind]
                buffer.zero_()
                prefill_keys = store_request_keys(
                    kind, [tokens // 4], buffer, freqs, sizes, jit, device, 300 + i
                )
                del decode_keys
                run_ = run_indexer(kind, "prefill", setup, pool, indexer, prefill_keys, [tokens // 4],
                                   freqs, sizes["topk"], device, 400 + i)  # fmt: skip
                result.runs.append(run_)
                result.checks += indexer_checks(run_, sizes["topk"])
                progress(f"{kind}: prefill of {tokens} tokens done ({run_.overlap_mean:.4f})")
            finally:
                indexer_mod.fused_q_indexer_rope_hadamard_quant = original_q
            result.executed += [f"{kind}: {name}" for name in executed_functions(kind, jit)]
            del pool, indexer
            if device.type == "cuda":
                torch.cuda.empty_cache()
    if placeholder:
        result.stand_ins.append(harness.sgl_kernel_stand_in(sgl_kernel_placeholder.imported_names()))
    return result


def render(result: Result) -> str:
    v = result.versions
    lines = [
        f"Device: {result.device} ({result.gpu_mem_gib:.2f} GiB as torch reports it); SGLang {v['sglang']}, "
        f"torch {v['torch']}, triton {v['triton']}, python {v['python']}; {v['date']}.",
        "",
        "| section | check | value | target | result |",
        "|---|---|---|---|---|",
    ]
    for c in result.checks:
        verdict = "reported" if c.ok is None else ("PASS" if c.ok else "FAIL")
        lines.append(f"| {c.section} | {c.item} | {c.value} | {c.target} | {verdict} |")
    lines += ["", "| kind | path | query rows | max keys | overlap mean / min | whole-forward peak | "
              "logits-call peak | logits function | seconds |", "|---|---|---|---|---|---|---|---|---|"]  # fmt: skip
    for r in result.runs:
        peak = "-" if r.peak_bytes is None else f"{r.peak_bytes / 2**20:.1f} MiB"
        lpeak = "-" if r.logits_peak_bytes is None else f"{r.logits_peak_bytes / 2**20:.1f} MiB"
        lines.append(
            f"| {r.kind} | {r.mode} | {r.rows:,} | {r.max_len:,} | {r.overlap_mean:.4f} / {r.overlap_min:.4f} | "
            f"{peak} | {lpeak} | {r.logits_fn} | {r.seconds:.2f} |"
        )
    lines += ["", "SGLang functions that executed:", ""] + [f"- {name}" for name in result.executed]
    lines += ["", "Stood in for:", "", "| SGLang piece | stand-in | why |", "|---|---|---|"]
    lines += [f"| {a} | {b} | {c} |" for a, b, c in result.stand_ins]
    failed = [c for c in result.checks if c.ok is False]
    lines += ["", f"{len(result.checks) - len(failed)} of {len(result.checks)} checks pass or are reported; "
              f"{len(failed)} failed."]  # fmt: skip
    return "\n".join(lines)


def as_json(result: Result) -> dict:
    return dataclasses.asdict(result)
