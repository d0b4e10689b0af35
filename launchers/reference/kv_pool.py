"""The engine's preallocated KV pool, in pages of `compress_ratio` (4) tokens.

One page holds, for its 4 token slots, every sliding-window layer's K and V and every DSA
layer's K and V (bf16), plus one compressed index key per DSA layer (the page is exactly one
indexer block): fp8 e4m3 data + one fp32 scale, bf16 data, or fp4 in SGLang 0.5.23's own page
layout (one uint8 buffer per layer: pages of 64 index slots, 64 x 64 code bytes then 64 x 4 scale
bytes; launchers/dsa/fp4.py), the index slot of a key being its KV page's id. All tensors are
allocated and zero-filled at startup, so the pool's memory is committed before the first request.

Requests take whole pages; admission blocks (threading.Condition) until enough pages are free,
and a request that needs more pages than the pool has raises PoolTooSmall at once. Pages held by
the prefix cache (launchers/reference/prefix_cache.py) count as free: when the free list runs
short, the pool takes them back through `reclaim` (the cache's LRU eviction).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Literal

import torch

from launchers.dsa import fp4
from launchers.reference.config import ModelConfig
from launchers.reference.engine_api import PoolTooSmall

INDEX_K_DTYPES = ("fp8", "bf16", "fp4")  # index-key precisions the pool can store


class KVPool:
    def __init__(
        self,
        cfg: ModelConfig,
        max_total_tokens: int,
        index_k_dtype: Literal["fp8", "bf16", "fp4"],
        kv_dtype: torch.dtype = torch.bfloat16,
    ):
        if index_k_dtype not in INDEX_K_DTYPES:
            raise ValueError(
                f"index_k_dtype must be one of {', '.join(INDEX_K_DTYPES)}, got {index_k_dtype!r}"
            )
        ratio = cfg.compress_ratio
        self.page_size = ratio
        self.n_pages = -(-max_total_tokens // ratio)
        self.max_total_tokens = self.n_pages * ratio
        self.index_k_dtype = index_k_dtype
        self.kv_dtype = kv_dtype  # K/V of the attention layers (bf16; fp32 for exactness tests)
        slots = self.max_total_tokens
        kv_shape = (slots, cfg.n_heads, cfg.head_dim)
        self.swa_k = torch.zeros(cfg.n_swa_layers, *kv_shape, dtype=kv_dtype)
        self.swa_v = torch.zeros_like(self.swa_k)
        self.dsa_k = torch.zeros(cfg.n_dsa_layers, *kv_shape, dtype=kv_dtype)
        self.dsa_v = torch.zeros_like(self.dsa_k)
        index_shape = (cfg.n_dsa_layers, self.n_pages, cfg.index_head_dim)
        if index_k_dtype == "fp8":
            self.index_k = torch.zeros(index_shape, dtype=torch.float8_e4m3fn)
            self.index_scale: torch.Tensor | None = torch.zeros(index_shape[:2], dtype=torch.float32)
        elif index_k_dtype == "fp4":
            if cfg.index_head_dim != fp4.HEAD_DIM:
                raise ValueError(
                    f"fp4 index keys need index_head_dim {fp4.HEAD_DIM}, got {cfg.index_head_dim}"
                )
            pages = fp4.cache_pages(self.n_pages)
            self.index_k = torch.zeros(
                cfg.n_dsa_layers, pages, fp4.PAGE_SLOTS * fp4.SLOT_BYTES, dtype=torch.uint8
            )
            self.index_scale = None  # the scales live in the same pages
        else:
            self.index_k = torch.zeros(index_shape, dtype=torch.bfloat16)
            self.index_scale = None
        tensors = [self.swa_k, self.swa_v, self.dsa_k, self.dsa_v, self.index_k]
        if self.index_scale is not None:
            tensors.append(self.index_scale)
        total = sum(t.numel() * t.element_size() for t in tensors)
        self.bytes_total = total
        self.kv_bytes_per_token = total // slots
        self._free = list(range(self.n_pages - 1, -1, -1))
        self._cond = threading.Condition()
        self._waiting = 0  # requests blocked in allocate() for want of free pages
        # the prefix cache's pages the pool may take back: how many now, and take up to n
        self.reclaimable: Callable[[], int] = lambda: 0
        self.reclaim: Callable[[int], list[int]] = lambda n: []

    @property
    def waiting(self) -> int:
        with self._cond:
            return self._waiting

    @property
    def free_pages(self) -> int:
        """Pages a request can get now: the free list and what the prefix cache would give back."""
        with self._cond:
            return len(self._free) + self.reclaimable()

    def pages_for(self, n_tokens: int) -> int:
        return -(-n_tokens // self.page_size)

    def allocate(self, n_tokens: int, have_pages: int = 0) -> torch.Tensor:
        """Page ids for n_tokens of which the caller already holds `have_pages` (a prefix-cache hit);
        waits until they are free. Raises PoolTooSmall if they never can be."""
        total = self.pages_for(n_tokens)
        need = total - have_pages
        if total > self.n_pages:
            raise PoolTooSmall(
                f"request needs {need * self.page_size} KV slots but the pool holds {self.max_total_tokens}"
                " tokens; raise --max-total-tokens or send a shorter request"
            )
        with self._cond:
            if len(self._free) + self.reclaimable() < need:
                self._waiting += 1
                try:
                    self._cond.wait_for(lambda: len(self._free) + self.reclaimable() >= need)
                finally:
                    self._waiting -= 1
            if len(self._free) < need:
                self._free.extend(self.reclaim(need - len(self._free)))
            pages = [self._free.pop() for _ in range(need)]
        return torch.tensor(pages, dtype=torch.long)

    def release(self, pages: torch.Tensor | list[int]) -> None:
        with self._cond:
            self._free.extend(pages.tolist() if isinstance(pages, torch.Tensor) else pages)
            self._cond.notify_all()
