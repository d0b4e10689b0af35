"""Byte layout of one page of SGLang 0.5.23's DeepSeek-V4 indexer-key pool, for fp8 and for bf16 keys.

SGLang's `DeepSeekV4IndexerPool` (srt/mem_cache/deepseek_v4_memory_pool.py) keeps, per layer, a
`uint8 [num_pages, page_bytes]` buffer. For the C4 indexer a page holds `page_size = 256 // 4 = 64`
compressed tokens (the indexer views it as `[num_pages, 64, 1, 132]`). The fp8 page is

    [ page_size x 128 fp8 e4m3 values | page_size x 4-byte fp32 scales ]   (132 bytes per token)

as its fused store kernel writes it (value at `offset * 128`, scale at `page_size * 128 + offset * 4`).
The bf16 page this project adds is plain rows, no scale:

    [ page_size x 128 bf16 values ]                                          (256 bytes per token)

A token at pool slot `loc` lives in page `loc // page_size`, row `loc % page_size`.
"""

from __future__ import annotations

from typing import Literal

import torch

IndexKDtype = Literal["fp8", "bf16"]

HEAD_DIM = 128
INDEX_PAGE_SIZE = 64  # compressed tokens per indexer page (SGLang: page_size 256 // compress ratio 4)
FP8_SCALE_BYTES = 4


def bytes_per_token(kind: IndexKDtype, head_dim: int = HEAD_DIM) -> int:
    """Pool bytes one compressed token takes: fp8 132 (values + fp32 scale), bf16 256."""
    if kind == "fp8":
        return head_dim + FP8_SCALE_BYTES
    if kind == "bf16":
        return head_dim * 2
    raise ValueError(f"index-K dtype must be 'fp8' or 'bf16', got {kind!r}")


def page_bytes(kind: IndexKDtype, page_size: int = INDEX_PAGE_SIZE, head_dim: int = HEAD_DIM) -> int:
    return page_size * bytes_per_token(kind, head_dim)


def new_pool(
    num_pages: int,
    kind: IndexKDtype,
    device: torch.device | str = "cpu",
    page_size: int = INDEX_PAGE_SIZE,
) -> torch.Tensor:
    """A zeroed `uint8 [num_pages, page_bytes]` buffer, allocated the way SGLang allocates one layer."""
    return torch.zeros(num_pages, page_bytes(kind, page_size), dtype=torch.uint8, device=device)


def pool_kind(pool: torch.Tensor, page_size: int = INDEX_PAGE_SIZE, head_dim: int = HEAD_DIM) -> IndexKDtype:
    """Which layout a pool buffer (any view whose first dim is pages) holds, from its page size in bytes."""
    per_page = pool.numel() * pool.element_size() // pool.shape[0]
    for kind in ("fp8", "bf16"):
        if per_page == page_bytes(kind, page_size, head_dim):
            return kind
    raise ValueError(
        f"index-K pool page of {per_page} bytes is neither fp8 ({page_bytes('fp8', page_size)}) nor "
        f"bf16 ({page_bytes('bf16', page_size)}) for page_size={page_size}, head_dim={head_dim}"
    )


def as_page_rows(pool: torch.Tensor) -> torch.Tensor:
    """The pool as contiguous `uint8 [num_pages, page_bytes]`, whatever view SGLang hands over."""
    if not pool.is_contiguous():
        raise ValueError("index-K pool buffer must be contiguous")
    return pool.view(torch.uint8).reshape(pool.shape[0], -1)
