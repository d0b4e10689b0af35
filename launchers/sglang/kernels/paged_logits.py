"""Decode index logits read straight from the pool's pages: the bf16 (and fp8) stand-in for DeepGEMM's
`fp8_paged_mqa_logits`, with the same arguments in the same order as SGLang 0.5.23's indexer passes them.

    logits[r, s] = k_scale[s] * sum_h weights[r, h] * ReLU(q[r, h] . k[s]),   s < seq_lens[r]

over the tokens of row r's pages `page_table[r]`. Entries at or past a row's length are not written
(DeepGEMM's clean_logits=False, the only mode SGLang uses). No buffer besides the logits is allocated.
"""

from __future__ import annotations

from typing import Any

import torch

from launchers.sglang.kernels._logits_core import LogitsConfig, launch
from launchers.sglang.kernels.layout import INDEX_PAGE_SIZE


def paged_mqa_logits(
    q: torch.Tensor,
    kv_cache: torch.Tensor,
    weights: torch.Tensor,
    seq_lens: torch.Tensor,
    page_table: torch.Tensor,
    schedule_metadata: Any,
    max_seq_len: int,
    clean_logits: bool = False,
    *,
    page_size: int = INDEX_PAGE_SIZE,
    out: torch.Tensor | None = None,
    config: LogitsConfig | None = None,
) -> torch.Tensor:
    """`q [R, 1, H, 128]` (fp8 e4m3 or bf16), `kv_cache` the pool (`[pages, page_bytes]` or SGLang's 4-D
    view), `weights [R, H]` fp32, `seq_lens [R]` or `[R, 1]` int32, `page_table [R, max_pages]` int32.
    `schedule_metadata` (DeepGEMM's SM schedule) is accepted and ignored. Returns fp32 `[R, max_seq_len]`."""
    del schedule_metadata  # the grid is derived from the shapes, so CUDA graphs capture it as is
    if clean_logits:
        raise ValueError(
            "clean_logits=True is not supported: SGLang passes False and reads only [0, seq_len)"
        )
    if q.dim() == 4:
        if q.shape[1] != 1:
            raise ValueError(f"one query token per row is supported (next_n=1), got q {tuple(q.shape)}")
        q = q[:, 0]
    rows = q.shape[0]
    lens = seq_lens.reshape(-1)
    if lens.shape[0] != rows or weights.shape[0] != rows or page_table.shape[0] != rows:
        raise ValueError(
            f"rows disagree: q {rows}, seq_lens {lens.shape[0]}, weights {weights.shape[0]}, "
            f"page_table {page_table.shape[0]}"
        )
    return launch(
        q=q,
        weights=weights,
        pool=kv_cache,
        page_table=page_table,
        seq_lens=lens,
        cu_q=None,
        out=out,
        num_requests=rows,
        max_q_len=1,
        max_seq_len=max_seq_len,
        page_size=page_size,
        config=config,
    )
