"""Packs the indexer top-k selections of one request the way SGLang 0.5.23 returns them.

SGLang returns meta_info.indexer_topk as base64 of an int32 array shaped
(seqlen - 1, num_indexer_layers, index_topk), seqlen = prompt + output tokens: one row per
position that was fed through the model (the last output token never is). The reference engine
reports selections only for the positions that produced an output token (the last prompt token
and each decoded token), so the rows of the other prompt positions are filled with -1.
Entries are compressed-block indices (block b = tokens 4b..4b+3), -1 where fewer blocks exist.
"""

from __future__ import annotations

import base64

import numpy as np


def indexer_topk_array(
    prompt_tokens: int, steps: list[np.ndarray], n_layers: int, index_topk: int
) -> np.ndarray:
    """int32 (prompt_tokens + len(steps) - 1, n_layers, index_topk); unreported rows are -1."""
    rows = max(0, prompt_tokens + len(steps) - 1)
    out = np.full((rows, n_layers, index_topk), -1, dtype=np.int32)
    for i, selection in enumerate(steps):
        sel = np.asarray(selection, dtype=np.int32)
        if sel.ndim != 2 or sel.shape[0] != n_layers or sel.shape[1] > index_topk:
            raise ValueError(
                f"indexer selection of step {i} has shape {sel.shape}, want ({n_layers}, <={index_topk})"
            )
        out[prompt_tokens - 1 + i, :, : sel.shape[1]] = sel
    return out


def encode_indexer_topk(array: np.ndarray) -> str:
    return base64.b64encode(np.ascontiguousarray(array, dtype=np.int32).tobytes()).decode("ascii")


def decode_indexer_topk(b64: str, n_layers: int, index_topk: int) -> np.ndarray:
    """Inverse of encode_indexer_topk (what extract_indexer_topk_from_meta_info + reshape do)."""
    flat = np.frombuffer(base64.b64decode(b64), dtype=np.int32)
    return flat.reshape(-1, n_layers, index_topk)
