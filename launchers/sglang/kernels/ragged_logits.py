"""Prefill index logits over many query tokens, read straight from the pool's pages.

Query rows `cu_seqlens_q[b]:cu_seqlens_q[b+1]` belong to request b and read its pages `page_table[b]`;
row t scores the first `seq_lens[t]` tokens (its causal length in compressed tokens):

    logits[t, s] = k_scale[s] * sum_h weights[t, h] * ReLU(q[t, h] . k[s]),   s < seq_lens[t]

Each program holds `block_q` query rows and walks their request's pages once for all of them, so a page
is read once per `block_q` rows instead of once per row, and the only buffer is the logits.
"""

from __future__ import annotations

import torch

from launchers.sglang.kernels._logits_core import LogitsConfig, launch
from launchers.sglang.kernels.layout import INDEX_PAGE_SIZE


def ragged_paged_mqa_logits(
    q: torch.Tensor,
    kv_cache: torch.Tensor,
    weights: torch.Tensor,
    seq_lens: torch.Tensor,
    page_table: torch.Tensor,
    cu_seqlens_q: torch.Tensor,
    max_q_len: int,
    max_seq_len: int,
    *,
    page_size: int = INDEX_PAGE_SIZE,
    out: torch.Tensor | None = None,
    config: LogitsConfig | None = None,
) -> torch.Tensor:
    """`q [T, H, 128]` (fp8 e4m3 or bf16), `weights [T, H]` fp32, `seq_lens [T]` int32, `page_table
    [B, max_pages]` int32, `cu_seqlens_q [B + 1]` int32, `max_q_len` the longest request in rows.
    Returns fp32 `[T, max_seq_len]`; entries at or past a row's length are not written."""
    rows = q.shape[0]
    requests = page_table.shape[0]
    if q.dim() != 3 or weights.shape[0] != rows or seq_lens.reshape(-1).shape[0] != rows:
        raise ValueError(f"q must be [T, H, D] with weights and seq_lens of T rows, got q {tuple(q.shape)}")
    if cu_seqlens_q.shape[0] != requests + 1:
        raise ValueError(f"cu_seqlens_q needs {requests + 1} entries, got {cu_seqlens_q.shape[0]}")
    return launch(
        q=q,
        weights=weights,
        pool=kv_cache,
        page_table=page_table,
        seq_lens=seq_lens.reshape(-1),
        cu_q=cu_seqlens_q,
        out=out,
        num_requests=requests,
        max_q_len=max_q_len,
        max_seq_len=max_seq_len,
        page_size=page_size,
        config=config,
    )
