"""SGLang 0.5.23's own DeepSeek-V4 objects, built without a server: runtime context, pool configurator,
KV pool, and the one kernel SGLang has no torch path for.

`sglang_validate.py` runs the bf16 index-K patch inside these real objects. A server builds them in its
model runner, which needs the model's weights; here the pieces are built one by one, from SGLang's own
classes and its own argument resolution (`ServerArgs.resolve_once`), for a DeepSeek-V4-shaped config.json
(the shipped DeepSeek-V4-Flash dimensions, optionally cut to a few layers). What is not SGLang's own is
named in `STAND_INS`, with why.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any

import torch

from launchers.planner import MODEL_CONFIG_DIR

FLASH_CONFIG = MODEL_CONFIG_DIR / "DeepSeek-V4-Flash.json"
TORCH_LOGITS_ENV = "SGLANG_FP8_PAGED_MQA_LOGITS_TORCH"

STAND_INS: tuple[tuple[str, str, str], ...] = (
    (
        "KVCacheConfigurator (model runner)",
        "a namespace of the 10 fields DSV4PoolConfigurator reads, from SGLang's ModelConfig, resolved "
        "ServerArgs and resolve_sliding_window_size",
        "the real one is built by a model runner that loads the weights",
    ),
    (
        "available KV bytes (_profile_available_bytes)",
        "GPU memory x mem-fraction, no weights",
        "what SGLang's profile gives on an empty GPU (free before = free after loading nothing)",
    ),
    (
        "sglang.kernels...fused_q_indexer_rope_hadamard_quant (C4Indexer.compute_q)",
        "torch: RoPE on dims 64..127, 128-point Hadamard, per-(row, head) fp8 with scale "
        "max(amax, 1e-4)/448 folded into the weights, as main_norm_rope.cuh computes it",
        "a JIT CUDA kernel (tvm-ffi + nvcc) with no torch fallback in SGLang; --jit builds the real one",
    ),
    (
        "fp8 keys: compress_norm_rope_store (SGLang's fused CUDA store)",
        "this project's fp8 Triton store, byte-for-byte SGLang's rule (KERNELS.md: 99.75% equal bytes)",
        "a JIT CUDA kernel; --jit builds the real one (bf16 keys go through the patch's own store)",
    ),
    (
        "compress_forward (the compressor's pooling before the store)",
        "random compressed rows fed straight to compress_norm_rope_store with SGLang's CompressorPrefillPlan",
        "a JIT CUDA kernel, and its plans need a running scheduler's request tables",
    ),
    (
        "fp8 logits: DeepGEMM fp8_paged_mqa_logits",
        f"SGLang's own fp8_paged_mqa_logits_torch ({TORCH_LOGITS_ENV}=1)",
        "DeepGEMM is not installed on the device image (KERNELS.md: it builds from source in ~75 s)",
    ),
    (
        "top-k: the sgl-kernel topk_transform_paged",
        "SGLang's own torch top-k (DSATopKBackend.TORCH, topk_transform_pytorch_vectorized)",
        "a JIT CUDA kernel; the torch one selects the same set (exact top-k)",
    ),
    (
        "attention backend (forward metadata, C4IndexerBackendMixin host)",
        "a C4IndexerBackendMixin subclass holding the real pool, SGLang's PagedIndexerMetadata and a "
        "core-metadata namespace (positions, output index buffers)",
        "the real backend is built per batch by the model runner",
    ),
)


# the stand-ins that `--jit` replaces with SGLang's own JIT CUDA kernels (built with nvcc + tvm-ffi)
JIT_REPLACED = (
    "sglang.kernels...fused_q_indexer_rope_hadamard_quant (C4Indexer.compute_q)",
    "fp8 keys: compress_norm_rope_store (SGLang's fused CUDA store)",
)


def sgl_kernel_stand_in(names: list[str]) -> tuple[str, str, str]:
    shown = ", ".join(n.removeprefix("sgl_kernel.") for n in names[:6]) + (", ..." if len(names) > 6 else "")
    return (
        "sgl_kernel (SGLang's compiled kernel package)",
        f"an import-only placeholder (sgl_kernel_placeholder.py): {len(names)} names imported ({shown}), "
        "none called (a call raises, and would fail the run)",
        "no sgl-kernel build exists for the image's torch 2.11 + CUDA 13; on CUDA the pool and indexer modules "
        "import it through mem_cache.memory_pool -> layers.quantization -> compressed_tensors_w8a8_int8 "
        "(int8_scaled_mm), code this path never runs",
    )


def model_config_dir(dest: Path, layers: int | None = None) -> Path:
    """Write the shipped DeepSeek-V4-Flash config.json (private keys dropped) into `dest`, optionally cut
    to its first `layers` entries of compress_ratios (plus the MTP entry SGLang expects)."""
    config = {
        k: v
        for k, v in json.loads(FLASH_CONFIG.read_text()).items()
        if not k.startswith(("_", "recall_eval"))
    }
    if layers is not None:
        # a C4 layer (with the indexer) first, then an HCA layer: both pool kinds exist
        ratios = ([4, 128] * layers)[:layers] + [0]
        config.update(num_hidden_layers=layers, compress_ratios=ratios)
    dest.mkdir(parents=True, exist_ok=True)
    (dest / "config.json").write_text(json.dumps(config))
    return dest


@dataclass
class Setup:
    """A resolved SGLang runtime for one DeepSeek-V4 config: ServerArgs published, ModelConfig built."""

    server_args: Any
    model_config: Any
    page_size: int
    max_running_requests: int

    def kv_cache_configurator(self) -> SimpleNamespace:
        """The fields of SGLang's KVCacheConfigurator that DSV4PoolConfigurator reads."""
        from sglang.srt.model_executor.model_runner_components.load_model_utils import (
            resolve_sliding_window_size,
        )
        from sglang.srt.speculative.spec_info import SpeculativeAlgorithm

        mc = self.model_config
        return SimpleNamespace(
            kv_cache_dtype_str=self.server_args.kv_cache_dtype,
            model_config=mc,
            spec_algorithm=SpeculativeAlgorithm.from_string(None),
            layer_info=SimpleNamespace(start_layer=0, end_layer=mc.num_hidden_layers),
            pp_size=1,
            pp_group=None,
            sliding_window_size=resolve_sliding_window_size(object(), mc),  # no model method: config's window
            page_size=self.page_size,
            attn_dp_size=1,
            spec_aux_config=None,
        )

    def pool_sizes(self, available_bytes: int) -> Any:
        """SGLang's DSV4PoolConfigurator on this budget, finalized as the model runner does."""
        from sglang.srt.model_executor.pool_configurator import DSV4PoolConfigurator

        configurator = DSV4PoolConfigurator(self.kv_cache_configurator())
        config = configurator.calculate_pool_sizes(available_bytes, self.page_size)
        config.max_running_requests = self.max_running_requests
        return configurator.finalize_with_max_running_requests(config)

    def build_pool(self, sizes: Any, device: str) -> Any:
        """SGLang's DeepSeekV4TokenToKVPool with the arguments KVCacheConfigurator._build_dsv4_kv_pool passes."""
        from sglang.srt.mem_cache.deepseek_v4_memory_pool import (
            DeepSeekV4TokenToKVPool,
            select_dsv4_kv_layout,
        )

        mc = self.model_config
        layout, compressed = select_dsv4_kv_layout()
        return DeepSeekV4TokenToKVPool(
            max_num_reqs=sizes.max_running_requests,
            num_req_slots=sizes.max_running_requests + 1,  # req_to_token rows
            swa_size=sizes.swa_max_total_num_tokens,
            c4_size=sizes.c4_max_total_num_tokens,
            c128_size=sizes.c128_max_total_num_tokens,
            c4_state_pool_size=sizes.c4_state_pool_size,
            c128_state_pool_size=sizes.c128_state_pool_size,
            page_size=self.page_size,
            swa_page_size=self.page_size,
            sliding_window=mc.window_size,
            dtype=torch.float8_e4m3fn,  # fp8_e4m3: SGLang's resolved KV dtype for DeepseekV4ForCausalLM
            c4_state_dtype=torch.float32,
            c128_state_dtype=torch.float32,
            qk_nope_head_dim=mc.qk_nope_head_dim,
            qk_rope_head_dim=mc.qk_rope_head_dim,
            indexer_head_dim=mc.index_head_dim,
            layer_num=mc.num_hidden_layers,
            device=device,
            enable_memory_saver=False,
            compression_ratios=mc.compress_ratios,
            start_layer=0,
            end_layer=mc.num_hidden_layers,
            kv_source_layers=list(mc.hf_config.kv_source_layer_ids),
            full_size=sizes.full_max_total_num_tokens,
            kv_layout=layout,
            compressed_kv_layout=compressed,
        )


def resolve(
    config_dir: Path, mem_fraction: float, context_length: int, max_running_requests: int | None = None
) -> Setup:
    """ServerArgs for this config, resolved by SGLang's own pipeline and published as the process's
    runtime context (what every SGLang module reads through get_schedule(), get_exec(), ...)."""
    from sglang.srt.configs.model_config import ModelConfig
    from sglang.srt.runtime_context import get_context, get_schedule
    from sglang.srt.server_args import ServerArgs

    args = ServerArgs(
        model_path=str(config_dir),
        mem_fraction_static=mem_fraction,
        context_length=context_length,
        skip_tokenizer_init=True,
        device="cuda",  # resolve as a CUDA server would, also where this runs on a CPU
        max_running_requests=max_running_requests,  # None: the model's default (256 for DeepSeek-V4)
    )
    args.resolve_once()
    get_context().set_server_args(args)
    schedule = get_schedule()
    return Setup(args, ModelConfig.from_server_args(args), schedule.page_size, schedule.max_running_requests)


@contextlib.contextmanager
def patch_state(index_k: str) -> Iterator[list[ModuleType]]:
    """SGLang's target modules with the bf16 patch applied (index_k 'bf16') or as shipped ('fp8')."""
    from launchers.sglang import bf16_index_k

    modules = bf16_index_k.apply()
    if index_k != "bf16":
        for module in modules:
            bf16_index_k.unpatch_module(module)
    try:
        yield modules
    finally:
        for module in modules:
            bf16_index_k.unpatch_module(module)


@contextlib.contextmanager
def env(name: str, value: str) -> Iterator[None]:
    old = os.environ.get(name)
    os.environ[name] = value
    try:
        yield
    finally:
        if old is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = old


def fused_q_standin(
    q_input: torch.Tensor,
    weight: torch.Tensor,
    weight_scale: float,
    freqs_cis: torch.Tensor,
    positions: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Torch stand-in for SGLang's JIT `fused_q_indexer_rope_hadamard_quant` (main_norm_rope.cuh), same
    signature and outputs: q `[T, H, 128]` -> (fp8 q, weights `[T, H, 1]` = weight x weight_scale x q scale)."""
    from launchers.sglang.kernels.reference import ROPE_DIM, hadamard_matrix

    x = q_input.float()
    rope_from = x.shape[-1] - ROPE_DIM
    f = torch.view_as_real(freqs_cis[positions.long()]).float()  # [T, 32, 2]: (cos, sin) per pair
    tail = x[..., rope_from:].reshape(*x.shape[:2], ROPE_DIM // 2, 2)
    re, im = tail[..., 0], tail[..., 1]
    cos, sin = f[:, None, :, 0], f[:, None, :, 1]
    rotated = torch.stack([re * cos - im * sin, re * sin + im * cos], dim=-1).flatten(-2)
    x = torch.cat([x[..., :rope_from], rotated], dim=-1) @ hadamard_matrix(x.shape[-1]).float().to(x.device)
    scale = x.abs().amax(dim=-1).clamp_min(1e-4) / 448.0
    q8 = (x / scale.unsqueeze(-1)).to(torch.float8_e4m3fn)
    weights = weight.float() * float(weight_scale) * scale
    return q8, weights.unsqueeze(-1)


def temp_config_dir(layers: int | None = None) -> Path:
    return model_config_dir(Path(tempfile.mkdtemp(prefix="recall-eval-dsv4-")), layers)
