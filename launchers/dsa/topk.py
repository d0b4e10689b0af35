"""Causal top-k over compressed blocks, and the local window that complements it.

A DSA query at position t attends to (a) every token of its local window and (b) every token of
the index_topk blocks its indexer scores highest. The window starts on a block boundary,
    window_start(t) = ratio * floor(max(0, t - window + 1) / ratio),
so it holds `window` to `window + ratio - 1` tokens, and the candidate blocks are exactly the
complete blocks before it: b < window_start(t) / ratio. Candidates and window never overlap and
leave no gap, and the indexer never spends its budget on tokens the window already covers.
"""

from __future__ import annotations

import torch


def window_start(pos: torch.Tensor, window: int, ratio: int) -> torch.Tensor:
    """First position of the local window of each query position (int64 tensor)."""
    return torch.div((pos - window + 1).clamp_min(0), ratio, rounding_mode="floor") * ratio


def n_candidate_blocks(pos: torch.Tensor, window: int, ratio: int) -> torch.Tensor:
    """How many blocks (0 .. n-1) the indexer may choose from for each query position."""
    return torch.div(window_start(pos, window, ratio), ratio, rounding_mode="floor")


def candidate_mask(n_candidates: torch.Tensor, n_blocks: int) -> torch.Tensor:
    """(...,) candidate counts -> (..., n_blocks) bool mask of selectable blocks."""
    blocks = torch.arange(n_blocks, device=n_candidates.device)
    return blocks < n_candidates.unsqueeze(-1)


def select_topk(logits: torch.Tensor, n_candidates: torch.Tensor, k: int) -> torch.Tensor:
    """Indices of the k best candidate blocks, best first; -1 pads where fewer exist.

    logits (..., n_blocks) fp32, n_candidates (...) int -> int64 (..., k).
    """
    n_blocks = logits.shape[-1]
    valid = candidate_mask(n_candidates, n_blocks)
    masked = logits.float().masked_fill(~valid, float("-inf"))
    kk = min(k, n_blocks)
    if kk == 0:
        return torch.full((*logits.shape[:-1], k), -1, dtype=torch.long, device=logits.device)
    values, idx = torch.topk(masked, kk, dim=-1)
    idx = idx.masked_fill(values == float("-inf"), -1)
    if kk < k:
        pad = torch.full((*idx.shape[:-1], k - kk), -1, dtype=idx.dtype, device=idx.device)
        idx = torch.cat([idx, pad], dim=-1)
    return idx
