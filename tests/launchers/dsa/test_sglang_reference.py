"""fp8 indexer logits against SGLang 0.5.23's own torch reference functions, on fresh random inputs.

Our path: Hadamard-rotated q and k, e4m3 with one fp32 scale per row (scale = amax / 448, the
CUDA store's rule), q scales folded into the head weights, fp32 arithmetic.
SGLang's references take the same fp8 tensors, multiply in bf16 (each head's q.k is rounded to
bf16) and accumulate in fp32. Stated tolerance, per logit:
    |ours - sglang| <= 2^-8 * sum_h |w_h| * |q8_h . k8| * s_k + 1e-6 * max|logit|
(the bf16 rounding of each head's product; ReLU is 1-Lipschitz).
"""

from __future__ import annotations

import pytest
import torch

from launchers.dsa.hadamard import rotate
from launchers.dsa.indexer import StoredKeys, index_logits, prepare_queries, store_keys
from tests.launchers.dsa.sglang_refs import sglang_reference_functions

pytestmark = pytest.mark.sglang

H, D, PAGE = 16, 128, 64


def _random_indexer_inputs(seed: int, n_q: int, n_k: int):
    g = torch.Generator().manual_seed(seed)
    q = rotate(torch.randn(n_q, H, D, generator=g) * torch.rand(n_q, H, 1, generator=g) * 3)
    k = rotate(torch.randn(n_k, D, generator=g) * torch.rand(n_k, 1, generator=g) * 2)
    w = torch.randn(n_q, H, generator=g) * (D**-0.5 * H**-0.5)
    return q, w, k


def _ours(q: torch.Tensor, w: torch.Tensor, stored: StoredKeys) -> torch.Tensor:
    """Our fp8 logits for queries (n_q, H, D) against one sequence's stored keys -> (n_q, n_k)."""
    assert stored.scale is not None
    batched = StoredKeys("fp8", stored.data.unsqueeze(0), stored.scale.unsqueeze(0))
    return index_logits(q.unsqueeze(0), w.unsqueeze(0), batched)[0]


def _tolerance(q8: torch.Tensor, w8: torch.Tensor, k8: torch.Tensor, k_scale: torch.Tensor) -> torch.Tensor:
    per_head = torch.einsum("qhd,nd->qhn", q8.float(), k8.float()).abs()
    bound = torch.einsum("qhn,qh->qn", per_head, w8.abs()) * k_scale.unsqueeze(0) * 2.0**-8
    return bound


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_fp8_logits_match_sglang_fp8_mqa_logits_torch(seed: int) -> None:
    fp8_mqa_logits_torch, _ = sglang_reference_functions()
    q, w, k = _random_indexer_inputs(seed, n_q=7, n_k=301)
    stored = store_keys(k, "fp8")
    assert stored.scale is not None
    ours = index_logits(
        q.unsqueeze(0),
        w.unsqueeze(0),
        stored if False else type(stored)("fp8", stored.data.unsqueeze(0), stored.scale.unsqueeze(0)),
    )[0]
    q8f, w8 = prepare_queries(q, w, "fp8")
    q8 = q8f.to(torch.float8_e4m3fn)
    ks = torch.zeros(7, dtype=torch.int32)
    ke = torch.full((7,), 301, dtype=torch.int32)
    ref = fp8_mqa_logits_torch(q8, (stored.data, stored.scale), w8, ks, ke)
    assert ref.shape == ours.shape
    tol = _tolerance(q8, w8, stored.data, stored.scale) + 1e-6 * ref.abs().max()
    assert bool(((ours - ref).abs() <= tol).all()), float(((ours - ref).abs() - tol).max())
    assert ref.abs().max() > 0


@pytest.mark.parametrize("seed", [3, 4])
def test_fp8_logits_match_sglang_paged_reference(seed: int) -> None:
    _, fp8_paged_mqa_logits_torch = sglang_reference_functions()
    batch, seq_lens = 3, [70, 129, 200]
    max_pages = -(-max(seq_lens) // PAGE)
    q, w, _ = _random_indexer_inputs(seed, n_q=batch, n_k=1)
    g = torch.Generator().manual_seed(seed + 100)
    n_pages = batch * max_pages
    cache = torch.zeros(n_pages, PAGE * (D + 4), dtype=torch.uint8)
    page_table = torch.randperm(n_pages, generator=g).view(batch, max_pages).to(torch.int32)
    keys = []
    for b, length in enumerate(seq_lens):
        k = rotate(torch.randn(length, D, generator=g) * torch.rand(length, 1, generator=g) * 2)
        stored = store_keys(k, "fp8")
        keys.append(stored)
        for i in range(length):  # SGLang's page layout: 64 rows of 128 fp8 bytes, then 64 fp32 scales
            page, slot = int(page_table[b, i // PAGE]), i % PAGE
            cache[page, slot * D : (slot + 1) * D] = stored.data[i].view(torch.uint8)
            cache[page, PAGE * D + slot * 4 : PAGE * D + slot * 4 + 4] = stored.scale[i : i + 1].view(
                torch.uint8
            )
    q8f, w8 = prepare_queries(q, w, "fp8")
    q8 = q8f.to(torch.float8_e4m3fn)
    ref = fp8_paged_mqa_logits_torch(
        q8.unsqueeze(1),
        cache.view(n_pages, PAGE, 1, D + 4),
        w8,
        torch.tensor(seq_lens, dtype=torch.int32),
        page_table,
        None,
        max(seq_lens),
        clean_logits=False,
    )
    for b, length in enumerate(seq_lens):
        stored = keys[b]
        ours = index_logits(
            q[b : b + 1].unsqueeze(0),
            w[b : b + 1].unsqueeze(0),
            type(stored)("fp8", stored.data.unsqueeze(0), stored.scale.unsqueeze(0)),
        )[0, 0]
        tol = (
            _tolerance(q8[b : b + 1], w8[b : b + 1], stored.data, stored.scale)[0] + 1e-6 * ref[b].abs().max()
        )
        assert bool(((ours - ref[b, :length]).abs() <= tol).all())
