"""The lightning indexer: which compressed blocks a query should attend to.

Score of query t for compressed key s (DeepSeek-V3.2 / V4):
    I(t, s) = sum_h w_h(t) * ReLU(q_h(t) . k_s)
with H_I query heads of D_I dims sharing one key per block (MQA), head weights w_h computed in
fp32, and q and k rotated by a Hadamard matrix. The keys are what the KV pool stores, in one of
three precisions (a runtime setting, not part of the weights):
- "fp8": e4m3 with one fp32 scale per compressed token (scale = amax / 448, SGLang 0.5.23's
  store); queries are quantized the same way per head and their scales folded into w_h, as
  SGLang's fused q kernel does; logits = sum_h w'_h ReLU(q8_h . k8) * k_scale.
- "bf16": q and k rounded to bf16, products accumulated in fp32.
- "fp4": e2m1 codes with a ue8m0 scale per 32 values (SGLang 0.5.23's DeepSeek-V4 fp4 indexer,
  launchers/dsa/fp4.py); logits from the dequantised keys and queries, the queries rounded to bf16
  and then to fp4 as SGLang's fused fp4 q kernel does; logits = sum_h w_h ReLU(q4_h . k4), in fp32.
"fp32" is the unrounded reference (training and tests).
No positional encoding: scores depend on content only, at any context length.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import torch
from torch import nn

from launchers.dsa.compressor import Compressor
from launchers.dsa.fp4 import dequantize_rows_e2m1, fake_quantize_e2m1, quantize_rows_e2m1
from launchers.dsa.fp8 import quantize_rows_e4m3
from launchers.dsa.hadamard import rotate

KeyDtype = Literal["fp8", "bf16", "fp4", "fp32"]


@dataclass(frozen=True)
class StoredKeys:
    """Compressed index keys as the pool holds them."""

    dtype: KeyDtype
    data: torch.Tensor  # (..., N, D): float8_e4m3fn, bfloat16 or float32; fp4: uint8 codes (..., N, D/2)
    # fp8: (..., N) fp32; fp4: ue8m0 exponents uint8 (..., N, D/32), or None when data already holds
    # the fp32 dequantised values (..., N, D) (exact, so the logits are the same)
    scale: torch.Tensor | None = None


def store_keys(keys: torch.Tensor, dtype: KeyDtype) -> StoredKeys:
    """Rotated fp32 keys (..., N, D) -> their stored form."""
    if dtype == "fp8":
        data, scale = quantize_rows_e4m3(keys)
        return StoredKeys("fp8", data, scale)
    if dtype == "bf16":
        return StoredKeys("bf16", keys.to(torch.bfloat16))
    if dtype == "fp4":
        codes, exponent = quantize_rows_e2m1(keys)
        return StoredKeys("fp4", codes, exponent)
    if dtype == "fp32":
        return StoredKeys("fp32", keys.float())
    raise ValueError(f"unknown index key dtype {dtype!r}: expected fp8, bf16, fp4 or fp32")


def prepare_queries(
    q: torch.Tensor, weights: torch.Tensor, dtype: KeyDtype
) -> tuple[torch.Tensor, torch.Tensor]:
    """Round rotated queries (..., H, D) the way the key precision's kernel does.

    Returns fp32 (q, weights): for fp8, q holds the e4m3 values and weights the folded scales.
    """
    if dtype == "fp8":
        q8, q_scale = quantize_rows_e4m3(q)
        return q8.float(), weights.float() * q_scale
    if dtype == "bf16":
        return q.to(torch.bfloat16).float(), weights.float()
    if dtype == "fp4":
        return fake_quantize_e2m1(q.to(torch.bfloat16)), weights.float()
    return q.float(), weights.float()


def index_logits(q: torch.Tensor, weights: torch.Tensor, keys: StoredKeys) -> torch.Tensor:
    """Indexer logits of every query against every stored key.

    q (B, Q, H, D) rotated fp32 queries, weights (B, Q, H) fp32, keys.data (B, N, D)
    -> (B, Q, N) fp32. All arithmetic after the storage rounding is fp32.
    """
    qf, w = prepare_queries(q, weights, keys.dtype)
    if keys.dtype == "fp4" and keys.scale is not None:
        k = dequantize_rows_e2m1(keys.data, keys.scale)
    else:
        # fp4 without its exponents must already be dequantised: packed codes are never read as values
        assert keys.dtype != "fp4" or keys.data.is_floating_point(), "fp4 codes need their scales"
        k = keys.data.float()
    scores = torch.einsum("bqhd,bnd->bqhn", qf, k).relu_()
    logits = torch.einsum("bqhn,bqh->bqn", scores, w)
    if keys.dtype == "fp8" and keys.scale is not None:
        logits = logits * keys.scale.unsqueeze(-2)
    return logits


class LightningIndexer(nn.Module):
    """Projections of one DSA layer's indexer: per-token queries and per-block keys."""

    def __init__(self, d_model: int, n_heads: int, head_dim: int, ratio: int = 4):
        super().__init__()
        self.n_heads = n_heads
        self.head_dim = head_dim
        self.wq = nn.Linear(d_model, n_heads * head_dim, bias=False)
        self.weights_proj = nn.Linear(d_model, n_heads, bias=False)
        self.compressor = Compressor(d_model, head_dim, ratio)
        # DeepSeek's weight scale: softmax scale D^-0.5 times H^-0.5
        self.weight_scale = head_dim**-0.5 * n_heads**-0.5

    def queries(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """x (..., d) -> rotated fp32 queries (..., H, D) and fp32 head weights (..., H)."""
        q = self.wq(x).float().unflatten(-1, (self.n_heads, self.head_dim))
        with torch.autocast(device_type=x.device.type, enabled=False):  # head weights stay fp32
            weights = nn.functional.linear(x.float(), self.weights_proj.weight.float())
            return rotate(q), weights * self.weight_scale

    def keys(self, x: torch.Tensor) -> torch.Tensor:
        """x (..., T, d) -> rotated fp32 keys of the complete blocks (..., T // ratio, D)."""
        return rotate(self.compressor(x))

    def block_keys(self, kv: torch.Tensor, score: torch.Tensor) -> torch.Tensor:
        """Rotated keys from already projected token features (..., n_blocks, ratio, D)."""
        return rotate(self.compressor.pool(kv, score))
