"""Building blocks of the reference model: MLP, RoPE, sliding-window and DSA attention."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from launchers.dsa.indexer import LightningIndexer
from launchers.dsa.norm import RMSNorm


class SwiGLU(nn.Module):
    def __init__(self, d_model: int, hidden: int):
        super().__init__()
        self.w_gate_up = nn.Linear(d_model, 2 * hidden, bias=False)
        self.w_down = nn.Linear(hidden, d_model, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        gate, up = self.w_gate_up(x).chunk(2, dim=-1)
        return self.w_down(F.silu(gate) * up)


def rope_tables(positions: torch.Tensor, dim: int, theta: float) -> tuple[torch.Tensor, torch.Tensor]:
    """cos, sin (T, dim/2) for integer positions, computed in float64 so large positions stay exact."""
    inv_freq = theta ** (-torch.arange(0, dim, 2, dtype=torch.float64, device=positions.device) / dim)
    angles = positions.to(torch.float64).unsqueeze(-1) * inv_freq
    return angles.cos().float(), angles.sin().float()


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """x (..., T, dim) rotated pairwise (first half, second half) by the angles of each position."""
    x1, x2 = x.float().chunk(2, dim=-1)
    out = torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1)
    return out.to(x.dtype)


def band_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, window: int) -> torch.Tensor:
    """Causal sliding-window attention in O(T * window): (B, H, T, hd) -> (B, H, T, hd).

    The sequence is cut into chunks of `window` queries; each chunk attends to itself and the
    previous chunk under one shared band mask (a broadcast additive mask, which lets SDPA use
    its fused kernels), all chunks in one batched call; the first chunk is plain causal.
    """
    b, h, t, hd = q.shape
    c = window
    n = -(-t // c)
    pad = n * c - t
    if pad:
        q, k, v = (F.pad(x, (0, 0, 0, pad)) for x in (q, k, v))
    qc, kc, vc = (x.reshape(b, h, n, c, hd) for x in (q, k, v))
    first = F.scaled_dot_product_attention(qc[:, :, 0], kc[:, :, 0], vc[:, :, 0], is_causal=True)
    if n == 1:
        return first[:, :, :t]
    kk = torch.cat([kc[:, :, :-1], kc[:, :, 1:]], dim=3)  # previous chunk, then this one
    vv = torch.cat([vc[:, :, :-1], vc[:, :, 1:]], dim=3)
    rel = (
        c + torch.arange(c, device=q.device).view(c, 1) - torch.arange(2 * c, device=q.device).view(1, 2 * c)
    )
    band = torch.zeros(c, 2 * c, dtype=q.dtype, device=q.device)
    band.masked_fill_((rel < 0) | (rel >= window), float("-inf"))
    rest = F.scaled_dot_product_attention(
        qc[:, :, 1:].reshape(b, h * (n - 1), c, hd),
        kk.reshape(b, h * (n - 1), 2 * c, hd),
        vv.reshape(b, h * (n - 1), 2 * c, hd),
        attn_mask=band.view(1, 1, c, 2 * c),
    )
    out = torch.cat([first.unsqueeze(2), rest.reshape(b, h, n - 1, c, hd)], dim=2)
    return out.reshape(b, h, n * c, hd)[:, :, :t]


class SlidingWindowBlock(nn.Module):
    """Pre-norm block: RoPE attention over the last `window` tokens, then a SwiGLU MLP."""

    def __init__(self, d_model: int, n_heads: int, mlp_hidden: int, window: int, eps: float):
        super().__init__()
        self.n_heads = n_heads
        self.window = window
        self.attn_norm = RMSNorm(d_model, eps)
        self.wqkv = nn.Linear(d_model, 3 * d_model, bias=False)
        self.wo = nn.Linear(d_model, d_model, bias=False)
        self.mlp_norm = RMSNorm(d_model, eps)
        self.mlp = SwiGLU(d_model, mlp_hidden)

    def qkv(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """x (B, T, d) -> q, k, v (B, H, T, hd), q and k rotated (both in one pass)."""
        qkv = self.wqkv(self.attn_norm(x)).unflatten(-1, (3, self.n_heads, -1))  # (B, T, 3, H, hd)
        qk = apply_rope(qkv[:, :, :2], cos.view(-1, 1, 1, cos.shape[-1]), sin.view(-1, 1, 1, sin.shape[-1]))
        q, k = qk.permute(2, 0, 3, 1, 4)
        return q, k, qkv[:, :, 2].transpose(1, 2)

    def finish(self, x: torch.Tensor, attn: torch.Tensor) -> torch.Tensor:
        """Residual add of the attention output (B, H, T, hd), then the MLP."""
        x = x + self.wo(attn.transpose(1, 2).flatten(2))
        return x + self.mlp(self.mlp_norm(x))

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """Full-sequence pass: returns the new x and this layer's k, v (B, H, T, hd)."""
        q, k, v = self.qkv(x, cos, sin)
        return self.finish(x, band_attention(q, k, v, self.window)), k, v


class DSABlock(nn.Module):
    """Pre-norm sparse attention block. Queries come from this layer's stream; keys, values and
    index keys come from `src`, the normalised output of the sliding-window stack (shared by all
    DSA layers, as in YOCO's cross-decoder). No positional encoding."""

    def __init__(
        self,
        d_model: int,
        n_heads: int,
        mlp_hidden: int,
        eps: float,
        index_heads: int,
        index_dim: int,
        ratio: int,
    ):
        super().__init__()
        self.n_heads = n_heads
        head_dim = d_model // n_heads
        self.scale = 1.0 / math.sqrt(head_dim)
        self.attn_norm = RMSNorm(d_model, eps)
        self.wq = nn.Linear(d_model, d_model, bias=False)
        self.wkv = nn.Linear(d_model, 2 * d_model, bias=False)
        self.q_norm = RMSNorm(head_dim, eps)
        self.k_norm = RMSNorm(head_dim, eps)
        self.wo = nn.Linear(d_model, d_model, bias=False)
        self.mlp_norm = RMSNorm(d_model, eps)
        self.mlp = SwiGLU(d_model, mlp_hidden)
        self.indexer = LightningIndexer(d_model, index_heads, index_dim, ratio)

    def kv(self, src: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """src (..., T, d) -> k, v (..., T, H, hd); k normalised."""
        k, v = self.wkv(src).unflatten(-1, (2, self.n_heads, -1)).unbind(-3)
        return self.k_norm(k), v

    def query(self, h: torch.Tensor) -> torch.Tensor:
        """h (..., d) -> normalised queries (..., H, hd), pre-scaled by 1/sqrt(hd)."""
        q = self.wq(self.attn_norm(h)).unflatten(-1, (self.n_heads, -1))
        return self.q_norm(q) * self.scale

    def finish(self, h: torch.Tensor, attn: torch.Tensor) -> torch.Tensor:
        """Residual add of the attention output (..., H, hd), then the MLP."""
        h = h + self.wo(attn.flatten(-2))
        return h + self.mlp(self.mlp_norm(h))
