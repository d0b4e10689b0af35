"""The code that runs inside an SGLang 0.5.23 server when bf16 index keys are on.

bf16_index_k.py installs these in place of SGLang's functions (see README.md for the list and why):
- `bytes_per_token_fn`: the indexer pool's bytes per compressed token, 256 instead of 132 (fp4 pools keep
  theirs), so the pool allocates bf16 pages and the memory planner budgets them;
- `compress_store_fn`: the compressor's fused norm/RoPE/Hadamard/store, routed to our Triton store when
  it writes indexer keys into a bf16 pool;
- `forward_c4_indexer`: the C4 indexer's scoring, with our paged / ragged Triton logits in place of
  DeepGEMM's fp8 kernels, then SGLang's own top-k transforms and capture, unchanged;
- `fp8_only_guard`: the pool's fp8-only accessors fail loudly on a bf16 pool instead of misreading it.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import torch

from launchers.sglang.kernels.layout import HEAD_DIM, as_page_rows, pool_kind
from launchers.sglang.kernels.store import norm_rope_hadamard_store
from launchers.sglang.refusal import PatchRefused, announce

PD_LAYOUT_SUFFIX = ",index_k:bf16"


def bytes_per_token_fn(original: Callable[[int, bool], int]) -> Callable[[int, bool], int]:
    @functools.wraps(original)
    def get_dsv4_indexer_bytes_per_token(index_head_dim: int, use_fp4_indexer: bool) -> int:
        if use_fp4_indexer:
            return original(index_head_dim, use_fp4_indexer)
        return index_head_dim * 2  # bf16, no scale

    return get_dsv4_indexer_bytes_per_token


def create_buffer_fn(original: Callable[[Any], None]) -> Callable[[Any], None]:
    @functools.wraps(original)
    def _create_buffer(self: Any) -> None:
        original(self)
        if not self.use_fp4_indexer:
            announce(
                f"bf16 index keys active: indexer pool of {self.layer_num} layers, page_size {self.page_size}, "
                f"{self.get_bytes_per_token()} bytes/token ({self.index_k_with_scale_buffer[0].shape[0]} pages)"
            )

    return _create_buffer


def pd_layout_fn(original: Callable[[Any], str]) -> Callable[[Any], str]:
    @functools.wraps(original)
    def pd_kv_layout(self: Any) -> str:
        # PD peers compare this string and refuse to pair on a mismatch (disaggregation/common/conn.py)
        return original(self) + PD_LAYOUT_SUFFIX

    return pd_kv_layout


def _is_bf16_pool(buffer: torch.Tensor, page_size: int) -> bool:
    try:
        return pool_kind(as_page_rows(buffer), page_size) == "bf16"
    except ValueError:
        return False


def fp8_only_guard(original: Callable[..., Any], name: str) -> Callable[..., Any]:
    @functools.wraps(original)
    def guarded(self: Any, *args: Any, **kwargs: Any) -> Any:
        buffers = self.index_k_with_scale_buffer
        if buffers is not None and _is_bf16_pool(buffers[0], self.page_size):
            raise PatchRefused(
                f"DeepSeekV4IndexerPool.{name} reads or writes the fp8 index-K layout, but this pool holds bf16 "
                "keys; this SGLang code path is not supported with index_k_dtype=bf16 (use fp8)"
            )
        return original(self, *args, **kwargs)

    return guarded


def compress_store_fn(original: Callable[..., None]) -> Callable[..., None]:
    @functools.wraps(original)
    def compress_norm_rope_store(kv: torch.Tensor, plan: Any, **kwargs: Any) -> None:
        kvcache = kwargs["kvcache"]
        page_size = kwargs["page_size"]
        is_indexer = kv.shape[-1] == HEAD_DIM and not kwargs.get("use_fp4", False)
        if not (is_indexer and _is_bf16_pool(kvcache, page_size)):
            return original(kv, plan, **kwargs)
        norm_weight = kwargs["norm_weight"]
        norm_rope_hadamard_store(
            kv,
            plan[1],
            is_decode=plan.is_decode,
            compress_ratio=plan.compress_ratio,
            norm_weight=norm_weight.to(kv.dtype),  # as SGLang's store does
            eps=kwargs["norm_eps"],
            freqs_real=torch.view_as_real(kwargs["freq_cis"]).flatten(-2),
            out_loc=kwargs["out_loc"],
            pool=kvcache,
            page_size=page_size,
        )

    return compress_norm_rope_store
