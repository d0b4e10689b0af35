"""Indexer logits: the fp32 formula, the bf16 path within bf16 rounding, the fp8 path's rounding."""

from __future__ import annotations

import torch

from launchers.dsa.compressor import Compressor
from launchers.dsa.fp8 import quantize_rows_e4m3
from launchers.dsa.indexer import LightningIndexer, index_logits, prepare_queries, store_keys

BF16_U = 2.0**-8  # unit roundoff of bf16 (8 significant bits)


def _inputs(seed: int, b: int = 2, q: int = 5, h: int = 8, n: int = 300, d: int = 128):
    g = torch.Generator().manual_seed(seed)
    return (
        torch.randn(b, q, h, d, generator=g),
        torch.randn(b, q, h, generator=g),
        torch.randn(b, n, d, generator=g) * 0.7,
    )


def test_fp32_logits_follow_the_definition() -> None:
    q, w, k = _inputs(0)
    got = index_logits(q, w, store_keys(k, "fp32"))
    want = torch.zeros(got.shape)
    for h in range(q.shape[2]):
        want += w[:, :, h : h + 1] * torch.relu(q[:, :, h] @ k.transpose(1, 2))
    assert torch.allclose(got, want, rtol=1e-5, atol=1e-4)


def test_bf16_logits_equal_fp32_within_bf16_rounding() -> None:
    q, w, k = _inputs(1)
    exact = index_logits(q, w, store_keys(k, "fp32"))
    got = index_logits(q, w, store_keys(k, "bf16"))
    # q and k each rounded once (relative error u): |q'k' - qk| <= (2u + u^2) sum_d |q_d k_d|; ReLU is 1-Lipschitz
    mag = torch.einsum("bqhd,bnd->bqhn", q.abs(), k.abs())
    bound = torch.einsum("bqhn,bqh->bqn", mag, w.abs()) * (2 * BF16_U + BF16_U**2) + 1e-4
    assert bool(((got - exact).abs() <= bound).all())
    assert not torch.equal(got, exact)  # the rounding is real
    assert store_keys(k, "bf16").data.dtype == torch.bfloat16


def test_fp8_path_is_sum_of_scaled_relu_products() -> None:
    q, w, k = _inputs(2)
    stored = store_keys(k, "fp8")
    assert stored.data.dtype == torch.float8_e4m3fn and stored.scale is not None
    q8, q_scale = quantize_rows_e4m3(q)
    got = index_logits(q, w, stored)
    want = torch.einsum(
        "bqhn,bqh->bqn",
        torch.relu(torch.einsum("bqhd,bnd->bqhn", q8.float(), stored.data.float())),
        w * q_scale,
    )
    want = want * stored.scale.unsqueeze(1)
    assert torch.allclose(got, want, rtol=1e-5, atol=1e-5)
    qf, wf = prepare_queries(q, w, "fp8")
    assert torch.equal(qf, q8.float()) and torch.equal(wf, w * q_scale)


def test_fp8_logits_track_fp32() -> None:
    q, w, k = _inputs(3)
    exact = index_logits(q, w, store_keys(k, "fp32"))
    got = index_logits(q, w, store_keys(k, "fp8"))
    rel = (got - exact).norm() / exact.norm()
    assert rel < 0.05  # e4m3 keeps 3 mantissa bits; errors average out over 128 dims


def test_compressor_pools_complete_blocks_only() -> None:
    torch.manual_seed(0)
    comp = Compressor(32, 16, ratio=4)
    x = torch.randn(2, 23, 32)
    keys = comp(x)
    assert keys.shape == (2, 5, 16)
    # a block's key depends on its own 4 tokens only
    x2 = x.clone()
    x2[:, 8:12] += 1.0
    keys2 = comp(x2)
    changed = (keys2 - keys).abs().amax(dim=(0, 2)) > 0
    assert changed.tolist() == [False, False, True, False, False]
    kv, score = comp.token_features(x[:, :8])
    assert torch.allclose(comp.pool(kv.view(2, 2, 4, 16), score.view(2, 2, 4, 16)), keys[:, :2])


def test_indexer_queries_have_fp32_weights_under_autocast() -> None:
    torch.manual_seed(0)
    idx = LightningIndexer(64, 4, 128)
    x = torch.randn(3, 64)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        q, w = idx.queries(x)
    assert w.dtype == torch.float32 and q.dtype == torch.float32
    assert q.shape == (3, 4, 128) and w.shape == (3, 4)
    assert torch.allclose(w, x @ idx.weights_proj.weight.T * 128**-0.5 * 4**-0.5, atol=1e-5)
