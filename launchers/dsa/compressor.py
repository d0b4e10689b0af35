"""The indexer's key compressor: one key per block of `ratio` (4) tokens.

As in DeepSeek-V4's compressor, each token contributes a candidate key and a per-dimension
score; the block's key is the score-softmax-weighted sum of its tokens' candidates (a learned
weighted pooling, with a learned bias per position inside the block), then RMS-normalised.
No positional encoding: a block's key depends only on the content of its own tokens, so keys
look the same at every context length.
"""

from __future__ import annotations

import torch
from torch import nn

from launchers.dsa.norm import RMSNorm


class Compressor(nn.Module):
    def __init__(self, d_model: int, dim: int, ratio: int = 4):
        super().__init__()
        self.ratio = ratio
        self.wkv = nn.Linear(d_model, dim, bias=False)
        self.wgate = nn.Linear(d_model, dim, bias=False)
        self.ape = nn.Parameter(torch.zeros(ratio, dim))
        self.norm = RMSNorm(dim)

    def token_features(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Per-token candidate keys and scores: x (..., T, d) -> two (..., T, dim) tensors."""
        return self.wkv(x), self.wgate(x)

    def pool(self, kv: torch.Tensor, score: torch.Tensor) -> torch.Tensor:
        """kv, score (..., n_blocks, ratio, dim) -> block keys (..., n_blocks, dim), fp32."""
        weights = torch.softmax(score.float() + self.ape.float(), dim=-2)
        pooled = (kv.float() * weights).sum(dim=-2)
        return self.norm(pooled)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x (..., T, d) -> keys of the complete blocks (..., T // ratio, dim), fp32."""
        n_blocks = x.shape[-2] // self.ratio
        x = x[..., : n_blocks * self.ratio, :]
        kv, score = self.token_features(x)
        shape = (*x.shape[:-2], n_blocks, self.ratio, kv.shape[-1])
        return self.pool(kv.reshape(shape), score.reshape(shape))
