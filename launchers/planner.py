"""Memory planner: what index-key precision costs in KV memory, from a model's config.json.

Byte counts follow SGLang 0.5.23's own sizing rules:
- index key per compressed token (mem_cache/deepseek_v4_memory_pool.get_dsv4_indexer_bytes_per_token):
  fp8 = D + D/128*4 (132 for D=128: 128 e4m3 bytes + one fp32 scale), fp4 = D/2 + D/32 (68),
  and the bundled patch's bf16 = 2*D (256);
- DeepSeek-V4 (model_executor/pool_configurator.py, DSV4PoolConfigurator, followed rule for rule): one
  584-byte latent slot (448 fp8 no-RoPE dims + 64 bf16 RoPE dims + 8 scale bytes) per compressed token,
  its pages padded to 576 bytes (FlashMLA's V4 layout: 585 B per token in a 256-token page, 864 in the
  2-token page of a ratio-128 layer); ratio-4 (CSA) layers also hold an index key per compressed token,
  ratio-128 (HCA) layers only the slot; the sliding-window pool is sized at swa_full_tokens_ratio (0.1)
  of the full pool and holds a slot in every layer plus the fp32 compress-state ring of the CSA layers;
  the HCA layers' fp32 compress-state rings (128 rows per request slot; max_running_requests = 256 as
  SGLang sets for DeepSeek-V4, or the profile's --max-running-requests) are fixed bytes taken off the
  budget first;
- DeepSeek-V3.2 (DSA): one latent slot per token and layer (bf16 576 dims = 1152 B, SGLang's default
  on Hopper) and an index key per token on every layer.
For DeepSeek-V4 the KV slots equal what SGLang's configurator computes from the same budget
(`python -m launchers.sglang_gpu_checks.validate_on_gpu --sglang` checks it against the real configurator); the
budget itself is GPU memory x mem-fraction - weights / tp, as SGLang profiles it on an otherwise empty GPU.
Request-slot tables and CUDA-graph buffers (outside the fraction) are left out.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from recall_eval.errors import BadInput
from recall_eval.types import IndexKDtype, Profile

MODEL_CONFIG_DIR = Path(__file__).parent / "model_configs"
GIB = 2**30
PRECISIONS: tuple[IndexKDtype, ...] = ("fp8", "fp4", "bf16")
DSV4_SWA_FULL_TOKENS_RATIO = 0.1  # SGLang 0.5.23 model_overrides/deepseek_v4.py
DSV4_PAGE_SIZE = 256  # idem
DSV4_C4_RING = 8  # get_compress_state_ring_size(4), no speculative decoding
DSV4_C128_RING = 128  # get_compress_state_ring_size(128), no speculative decoding, offline compression
DSV4_SLOT_PAGE_ALIGN = 576  # KVLayout.V4.page_align: a latent page's bytes round up to this
DSV4_MAX_RUNNING_REQUESTS = 256  # SGLang 0.5.23 model_overrides/deepseek_v4.py, when not given
COMPRESS_STATE_BYTES = 4  # fp32 compress state (SGLANG_DSV4_COMPRESS_STATE_DTYPE default)
DEFAULT_GPU_MEM_GIB = 139.8  # an H200 as torch reports it
DEFAULT_MEM_FRACTION = 0.85


def indexer_logits_bytes(query_rows: int, ratio: int = 4) -> int:
    """The indexer's fp32 logits for an eager prefill of `query_rows` tokens: rows x (keys rounded up to 256
    columns) x 4 bytes, keys = tokens / ratio (SGLang's mqa_logits_row_bytes). The one transient of the
    indexer that scales with context and sits outside the pools that mem-fraction sizes."""
    keys = -(-query_rows // ratio)
    return query_rows * (-(-keys // 256) * 256) * 4


def index_key_bytes(dtype: IndexKDtype, index_head_dim: int) -> int:
    """Bytes of one stored index key (one compressed token, one layer)."""
    if dtype == "fp8":
        return index_head_dim + index_head_dim // 128 * 4
    if dtype == "fp4":
        return index_head_dim // 2 + index_head_dim // 32
    return 2 * index_head_dim


@dataclass(frozen=True)
class KVLayout:
    """What one token costs in each pool, by layer kind, read from config.json."""

    family: str  # "deepseek_v4" or "deepseek_v32"
    n_layers: int
    index_layers: int  # layers with a lightning indexer
    index_ratio: int  # tokens per index key (4 for V4's CSA layers, 1 for V3.2)
    index_head_dim: int
    slot_bytes: int  # one latent KV slot
    compressed_layers: dict[int, int] = field(
        default_factory=dict
    )  # ratio -> layers holding slots at that ratio
    swa_ratio: float = 0.0  # sliding-window pool size as a share of the full pool (V4)
    attn_head_dim: int = 0  # V4: width of the compress state of the CSA layers
    page_size: int = 1
    slot_page_align: int = 1  # a latent page's bytes round up to a multiple of this
    max_running_requests: int = 0  # V4: sizes the HCA compress-state rings (fixed bytes)
    precisions: tuple[IndexKDtype, ...] = ("fp8",)  # what SGLang 0.5.23 (+ the bundled patch) can store
    notes: tuple[str, ...] = ()

    def kv_bytes_per_token(self, dtype: IndexKDtype) -> float:
        key = index_key_bytes(dtype, self.index_head_dim)
        if self.family == "deepseek_v32":
            return self.n_layers * (self.slot_bytes + key)
        per_token = 0.0
        for ratio, layers in self.compressed_layers.items():
            index = key if ratio == self.index_ratio else 0
            per_token += layers * (self.paged_slot_bytes(ratio) + index) / ratio
        return per_token + self.swa_ratio * self.swa_bytes_per_token()

    def paged_slot_bytes(self, ratio: int = 1) -> float:
        """Bytes of one latent slot with its page's padding, in a layer of this compression ratio
        (pool_configurator._get_paged_kv_bytes_per_token: a page holds page_size / ratio slots)."""
        slots = max(self.page_size // ratio, 1)
        align = self.slot_page_align
        return -(-slots * self.slot_bytes // align) * align / slots

    def swa_bytes_per_token(self) -> float:
        c4_layers = self.compressed_layers.get(4, 0)
        c4_state = 2 * 2 * (self.attn_head_dim + self.index_head_dim) * COMPRESS_STATE_BYTES
        return self.paged_slot_bytes() * self.n_layers + DSV4_C4_RING / self.page_size * c4_state * c4_layers

    def fixed_bytes(self) -> int:
        """Bytes taken off the budget before any token: the HCA layers' compress-state rings, one per
        request slot (pool_configurator._get_c128_state_fixed_bytes, offline compression)."""
        hca_layers = self.compressed_layers.get(128, 0)
        if self.family != "deepseek_v4" or not hca_layers:
            return 0
        rows = (self.max_running_requests + 1) * DSV4_C128_RING + DSV4_C128_RING + 1
        rows = -(-rows // 128) * 128
        return rows * 2 * self.attn_head_dim * COMPRESS_STATE_BYTES * hca_layers

    def index_bytes_per_token(self, dtype: IndexKDtype) -> float:
        return self.index_layers * index_key_bytes(dtype, self.index_head_dim) / self.index_ratio


def layout_from_config(config: dict[str, Any]) -> KVLayout:
    layers = int(config["num_hidden_layers"])
    if "compress_ratios" in config:
        ratios = [int(r) for r in config["compress_ratios"][:layers]]
        head_dim, rope = int(config.get("head_dim", 512)), int(config.get("qk_rope_head_dim", 64))
        if head_dim != 512:
            raise BadInput(
                f"DeepSeek-V4 planner expects head_dim 512 (SGLang's FlashMLA slot), got {head_dim}"
            )
        counts = {ratio: ratios.count(ratio) for ratio in sorted(set(ratios)) if ratio > 1}
        return KVLayout(
            family="deepseek_v4",
            n_layers=layers,
            index_layers=counts.get(4, 0),
            index_ratio=4,
            index_head_dim=int(config["index_head_dim"]),
            slot_bytes=(head_dim - rope) + 2 * rope + 8,
            compressed_layers=counts,
            swa_ratio=DSV4_SWA_FULL_TOKENS_RATIO,
            attn_head_dim=head_dim,
            page_size=DSV4_PAGE_SIZE,
            slot_page_align=DSV4_SLOT_PAGE_ALIGN,
            max_running_requests=DSV4_MAX_RUNNING_REQUESTS,
            precisions=PRECISIONS,
            notes=(
                f"layers: {ratios.count(0) + ratios.count(1)} sliding-window only, {counts.get(4, 0)} CSA (ratio 4, "
                f"with indexer), {counts.get(128, 0)} HCA (ratio 128); index keys exist in CSA layers only, one per 4 tokens",
            ),
        )
    if "index_topk" in config and "kv_lora_rank" in config:
        rope = int(config.get("qk_rope_head_dim", 64))
        return KVLayout(
            family="deepseek_v32",
            n_layers=layers,
            index_layers=layers,
            index_ratio=1,
            index_head_dim=int(config["index_head_dim"]),
            slot_bytes=2 * (int(config["kv_lora_rank"]) + rope),
            page_size=64,
            precisions=("fp8",),
            notes=(
                "KV latent in bf16 (SGLang's DSA default on Hopper; fp8_e4m3 on Blackwell would be 656 B)",
                "SGLang 0.5.23 stores V3.2 index keys in fp8 only: fp4 and bf16 rows are what they would cost",
            ),
        )
    raise BadInput(
        "cannot plan this model: its config.json has neither compress_ratios (DeepSeek-V4) nor index_topk + kv_lora_rank (DeepSeek-V3.2)"
    )


def find_model_config(profile: Profile) -> tuple[dict[str, Any], str, float | None]:
    """(config, where it came from, weights GiB or None): a local model dir's config.json, else the shipped
    config named like the model path's last part (launchers/model_configs/<name>.json)."""
    if not profile.model_path:
        raise BadInput(
            f"profile {profile.name!r} has no model_path to plan for (the reference engine reports its own pool "
            "in /server_info); pass --model-path DIR with a DeepSeek-V4 or V3.2 config.json"
        )
    local = Path(profile.model_path).expanduser()
    if (local / "config.json").is_file():
        config = json.loads((local / "config.json").read_text())
        weights = sum(path.stat().st_size for path in local.glob("*.safetensors")) / GIB or None
        return config, str(local / "config.json"), weights
    shipped = MODEL_CONFIG_DIR / f"{Path(profile.model_path).name}.json"
    if shipped.is_file():
        config = json.loads(shipped.read_text())
        return config, str(shipped), config.get("recall_eval_weights_gib")
    known = ", ".join(sorted(path.stem for path in MODEL_CONFIG_DIR.glob("*.json")))
    raise BadInput(
        f"no config.json for {profile.model_path!r}: not a local model dir and not shipped ({known}); "
        "pass --model-path DIR with the model's config.json"
    )


@dataclass(frozen=True)
class PrecisionRow:
    dtype: IndexKDtype
    available: bool
    key_bytes: int  # one index key
    index_bytes_per_token_layer: float  # per token, per indexer layer
    index_bytes_per_token: float  # per token, all layers
    kv_bytes_per_token: float  # all pools, per token
    max_tokens: int
    sequences: int  # of context_length tokens
    delta_bytes_per_token: float  # vs fp8
    delta_gib_at_context: float  # extra memory for one context_length sequence, vs fp8
    slots_change: float  # relative change of max_tokens vs fp8 (-0.13 = 13% fewer)


@dataclass(frozen=True)
class Plan:
    model: str
    config_source: str
    layout: KVLayout
    tp: int
    gpu_mem_gib: float
    mem_fraction: float
    weights_gib: float | None
    pool_gib: float  # per GPU (the latent KV is replicated across TP ranks: one KV head)
    context_length: int
    rows: tuple[PrecisionRow, ...]
    notes: tuple[str, ...]


def max_running_requests_arg(profile_name: str, extra_args: Sequence[str]) -> int | None:
    """--max-running-requests as a profile's extra_args pass it to SGLang (`--flag N` or `--flag=N`; the
    last one wins, as in SGLang's own parser), or None when they do not set it."""
    parser = argparse.ArgumentParser(add_help=False, allow_abbrev=False, exit_on_error=False)
    parser.add_argument("--max-running-requests", type=int)
    try:
        value = parser.parse_known_args(list(extra_args))[0].max_running_requests
    except argparse.ArgumentError as err:
        raise BadInput(f"profile {profile_name!r}: extra_args {err}") from None
    if value is not None and value < 1:
        raise BadInput(
            f"profile {profile_name!r}: extra_args --max-running-requests {value}: must be at least 1"
        )
    return value


def _page_floor(tokens: float, page: int) -> int:
    return int(tokens) // page * page


def make_plan(
    profile: Profile,
    context_length: int | None = None,
    gpu_mem_gib: float | None = None,
    weights_gib: float | None = None,
) -> Plan:
    if gpu_mem_gib is not None and gpu_mem_gib <= 0:
        raise BadInput(f"--gpu-mem-gb {gpu_mem_gib:g}: must be above 0 GiB")
    if weights_gib is not None and weights_gib < 0:
        raise BadInput(f"--weights-gb {weights_gib:g}: must be 0 GiB or more")
    config, source, shipped_weights = find_model_config(profile)
    layout = layout_from_config(config)
    slots = max_running_requests_arg(profile.name, profile.extra_args)
    if layout.family == "deepseek_v4" and slots is not None:
        layout = replace(layout, max_running_requests=slots)
    positions = config.get("max_position_embeddings")
    if context_length is not None and context_length < 1:
        raise BadInput(f"--context-length {context_length}: must be at least 1 token")
    context = context_length or profile.context_length or int(positions or 131072)
    if positions and context > int(positions):
        raise BadInput(
            f"--context-length {context:,} is past the model's {int(positions):,} positions "
            f"(max_position_embeddings in {source}); give at most {int(positions)}"
        )
    gpu = gpu_mem_gib or DEFAULT_GPU_MEM_GIB
    fraction = profile.mem_fraction_static or DEFAULT_MEM_FRACTION
    weights = weights_gib if weights_gib is not None else shipped_weights
    pool_gib = gpu * fraction - (weights or 0.0) / profile.tp
    notes = list(layout.notes)
    if weights is None:
        notes.append("weights size unknown (pass --weights-gb): the pool below counts no weights")
    if pool_gib <= 0:
        notes.append(
            f"the weights ({weights:.0f} GiB over tp={profile.tp}) do not fit in {fraction:.2f} x {gpu:.1f} GiB"
        )
    token_bytes = max(int(pool_gib * GIB) - layout.fixed_bytes(), 0)  # what SGLang divides among tokens
    if layout.fixed_bytes():
        slots_source = (
            ", --max-running-requests in the profile" if slots else ", SGLang's default for this model"
        )
        notes.append(
            f"{layout.fixed_bytes() / GIB:.2f} GiB of the pool go to the HCA layers' compress-state rings "
            f"({layout.max_running_requests} request slots{slots_source}) "
            "before any token, as SGLang's configurator sizes them"
        )
    fp8_bytes = layout.kv_bytes_per_token("fp8")
    fp8_tokens = _page_floor(token_bytes / fp8_bytes, layout.page_size)
    rows = []
    for dtype in PRECISIONS:
        per_token = layout.kv_bytes_per_token(dtype)
        tokens = _page_floor(token_bytes / per_token, layout.page_size)
        index_total = layout.index_bytes_per_token(dtype)
        rows.append(
            PrecisionRow(
                dtype=dtype,
                available=dtype in layout.precisions,
                key_bytes=index_key_bytes(dtype, layout.index_head_dim),
                index_bytes_per_token_layer=index_key_bytes(dtype, layout.index_head_dim)
                / layout.index_ratio,
                index_bytes_per_token=index_total,
                kv_bytes_per_token=per_token,
                max_tokens=tokens,
                sequences=tokens // context,
                delta_bytes_per_token=per_token - fp8_bytes,
                delta_gib_at_context=(per_token - fp8_bytes) * context / GIB,
                slots_change=(tokens / fp8_tokens - 1.0) if fp8_tokens else 0.0,
            )
        )
    if pool_gib > 0 and rows[0].sequences == 0:
        notes.append(
            f"one sequence of {context:,} tokens does not fit in the pool ({fp8_tokens:,} tokens at fp8): "
            "lower --context-length or raise --mem-fraction / --tp"
        )
    notes += seed_comparison(layout, context)
    return Plan(
        model=profile.model_path or profile.name,
        config_source=source,
        layout=layout,
        tp=profile.tp,
        gpu_mem_gib=gpu,
        mem_fraction=fraction,
        weights_gib=weights,
        pool_gib=pool_gib,
        context_length=context,
        rows=tuple(rows),
        notes=tuple(notes),
    )


def seed_comparison(layout: KVLayout, context: int) -> list[str]:
    """How the figures quoted for the original deployment (bf16 index keys: ~2.5 KB/token more, ~1.3 GB more at 524,288
    tokens, ~13% fewer slots) relate to this plan's accounting."""
    if layout.family != "deepseek_v4":
        return []
    per_key = index_key_bytes("bf16", layout.index_head_dim) - index_key_bytes("fp8", layout.index_head_dim)
    per_slot_all_layers = per_key * layout.index_layers
    per_token = per_slot_all_layers / layout.index_ratio
    compressed_only = {
        dtype: sum(
            layers
            * (layout.slot_bytes + (index_key_bytes(dtype, layout.index_head_dim) if ratio == 4 else 0))
            / ratio
            for ratio, layers in layout.compressed_layers.items()
        )
        for dtype in ("fp8", "bf16")
    }
    fewer_without_swa = 1 - compressed_only["fp8"] / compressed_only["bf16"]
    fewer_all = 1 - layout.kv_bytes_per_token("fp8") / layout.kv_bytes_per_token("bf16")
    seed_tokens = 524288
    return [
        f"bf16 vs fp8 index keys: +{per_key} B per key x {layout.index_layers} CSA layers = +{per_slot_all_layers:,} B "
        f"({per_slot_all_layers / 1024:.2f} KiB) per compressed slot = +{per_token:,.0f} B per token "
        f"(one key per {layout.index_ratio} tokens)",
        f"the often-quoted '~2.5 KB/token more' for bf16 index keys is the {per_slot_all_layers / 1024:.2f} KiB per "
        f"compressed slot: it counts one index key per token; per token the difference is {layout.index_ratio}x "
        f"smaller ({per_token:,.0f} B)",
        f"the often-quoted '~1.3 GB more at 524,288 tokens' = {per_slot_all_layers:,} B x 524,288 = "
        f"{per_slot_all_layers * seed_tokens / GIB:.2f} GiB: right for 524,288 compressed slots (2,097,152 tokens); "
        f"524,288 tokens cost +{per_token * seed_tokens / GIB:.2f} GiB",
        f"the often-quoted '~13% fewer slots': {fewer_all:.1%} fewer here with the sliding-window pool counted, "
        f"{fewer_without_swa:.1%} counting the compressed pools alone; the real share depends on how SGLang "
        "sized the SWA pool and its fixed buffers in that deployment",
    ]
