"""Planted indexer-kernel bugs: the classes of bug real DSA indexer kernels have had, built into the
reference engine on purpose so that a regression gate can be shown to catch them.

Off unless a profile sets `fault = NAME` (`--fault NAME` on the server); a server with one says so in
its start-up log, its /server_info and every run that used it. Each is applied faithfully to the bug
class, never tuned to the model: what it costs in recall is whatever the model loses to it.
"""

from __future__ import annotations

# imports nothing heavy: the server validates --fault before it loads torch and the model
SCALE_FAULTS = ("scale_block", "scale_page")  # the faults that misread stored key scales
INDEX_PAGE_SLOTS = 64  # keys per index-K page, as SGLang pages them (launchers/dsa/fp4.PAGE_SLOTS)
# a kernel whose candidate buffer holds this many compressed blocks and silently ignores the rest
TRUNCATE_ABOVE_BLOCKS = 512  # 2,048 tokens at 4 tokens per block

FAULTS: dict[str, str] = {
    "page_boundary": (
        "the index page table counts whole pages only (floor where ceil was meant): keys past the last "
        f"{INDEX_PAGE_SLOTS}-key page boundary are never scored"
    ),
    "scale_block": (
        "quantisation scales applied to the wrong block: each fp8 key is dequantised with the next key's "
        "scale, each fp4 block with the next block's exponent"
    ),
    "scale_page": (
        "quantisation scales read from the wrong index-K page (SGLang's paged layout stores a page's "
        f"{INDEX_PAGE_SLOTS} keys' codes, then their scales: a page-offset bug): each key dequantised "
        f"with the scale of the key in the same slot of the next page ({INDEX_PAGE_SLOTS} keys on)"
    ),
    "topk_truncated": (
        f"top-k silently truncated above a length: a query with more than {TRUNCATE_ABOVE_BLOCKS} candidate "
        f"blocks ({TRUNCATE_ABOVE_BLOCKS * 4:,} tokens) scores only the first {TRUNCATE_ABOVE_BLOCKS}"
    ),
    "prefix_cache_stale_index": (
        "index keys of a previous request read after a prefix-cache hit: a prompt that reuses cached "
        "pages skips the index-key store for its new pages (K and V are written, the index-K pages "
        "are not re-keyed), so its suffix is scored with whatever keys those pages held before"
    ),
}


def check(fault: str | None, index_k_dtype: str, prefix_cache: bool = True) -> None:
    """Refuse an unknown fault, or one that cannot exist at this precision or without the prefix
    cache (ValueError)."""
    if fault is None:
        return
    if fault not in FAULTS:
        raise ValueError(f"unknown fault {fault!r}: known faults are {', '.join(FAULTS)}")
    if fault in ("scale_block", "scale_page") and index_k_dtype not in ("fp8", "fp4"):
        raise ValueError(f"fault {fault} needs scaled index keys (fp8 or fp4), not {index_k_dtype}")
    if fault == "prefix_cache_stale_index" and not prefix_cache:
        raise ValueError("fault prefix_cache_stale_index needs the prefix cache (drop --disable-radix-cache)")


def skips_index_store(fault: str | None, cached_tokens: int) -> bool:
    """Whether the faulty prefill leaves the index keys of a prompt's new pages unwritten."""
    return fault == "prefix_cache_stale_index" and cached_tokens > 0


def scored_candidates(fault: str | None, n_candidates: int) -> int:
    """How many of a query's candidate blocks (0 .. n-1) the faulty indexer scores."""
    if fault == "page_boundary":
        return n_candidates // INDEX_PAGE_SLOTS * INDEX_PAGE_SLOTS
    if fault == "topk_truncated" and n_candidates > TRUNCATE_ABOVE_BLOCKS:
        return TRUNCATE_ABOVE_BLOCKS
    return n_candidates


def misread_scales(keys, fault: str | None):  # (StoredKeys, ...) -> StoredKeys; torch loaded lazily
    """Stored index keys as a faulty kernel reads them: `scale_block` dequantises fp8 key j with key
    j+1's scale and fp4 block b of a key with block b+1's exponent (the last wraps to the first);
    `scale_page` reads key j with the scale(s) of key j + 64, the same slot of the next index-K page
    (the last page wraps to the first). Keys (..., N, D) with scales (..., N) or (..., N, 4), as the
    engine reads its candidates (batch 1) and the training path its padded batches. Other faults
    leave the keys as they are."""
    if fault not in SCALE_FAULTS or keys.scale is None:
        return keys
    import torch

    from launchers.dsa.indexer import StoredKeys

    if fault == "scale_block":
        return StoredKeys(keys.dtype, keys.data, torch.roll(keys.scale, -1, dims=-1))
    key_axis = keys.data.dim() - 2
    return StoredKeys(keys.dtype, keys.data, torch.roll(keys.scale, -INDEX_PAGE_SLOTS, dims=key_axis))
