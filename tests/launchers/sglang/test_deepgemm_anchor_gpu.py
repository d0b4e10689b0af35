"""This project's fp8 index logits against SGLang's production kernels (DeepGEMM) on the same pool bytes.

Both read the same `[64 x 128 e4m3 | 64 x fp32 scale]` pages with the same q and weights; a wrong reading
of the layout (a scale from the wrong row, a page misplaced) or of the formula shows up as a large error
here. What remains is fp32 rounding: on the H200 the two differ by 2e-7 (KERNELS.md, Anchor); each is
3e-3 to 7e-3 from fp64 math on the stored keys.
Runs where `deep_gemm` imports (a Hopper GPU with DeepGEMM built for this torch); skips elsewhere.
"""

from __future__ import annotations

import pytest
import torch

from launchers.sglang.kernels import layout
from launchers.sglang.kernels.paged_logits import paged_mqa_logits
from launchers.sglang.kernels.reference import slots_of
from launchers.sglang.kernels.store import store_index_k
from launchers.sglang_gpu_checks import deepgemm_anchor as da
from launchers.sglang_gpu_checks import kernel_checks as kc

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA"),
]
CUDA = torch.device("cuda")


@pytest.fixture(scope="module")
def dg():
    module, why = da.load_deep_gemm()
    if module is None:
        pytest.skip(why)
    return module


def _assert_agrees(check: da.AnchorCheck) -> None:
    assert check.dg_all_finite
    assert check.rel_err_ours_vs_dg <= 1e-5  # same bytes, same fp8 dot: fp32 rounding apart (H200: 2e-7)
    assert check.rel_err_dg_vs_stored <= 1e-2  # DeepGEMM itself computes the formula we assume
    assert check.rel_err_ours_vs_stored <= 1e-2
    assert min(check.overlap.values()) >= 0.99


def test_paged_fp8_logits_match_deepgemm(dg) -> None:
    _assert_agrees(da.check_paged_against_dg(dg, [4096, 20000, 65536 - 63, 131072], (512, 1024), 201, CUDA))


def test_ragged_fp8_logits_match_deepgemm(dg) -> None:
    _assert_agrees(da.check_ragged_against_dg(dg, 16384, 256, (512, 1024), 202, CUDA))


def test_a_misread_scale_is_caught(dg) -> None:
    """The check can fail: shifting every page's scales by one token breaks the agreement."""
    lengths = [8192]
    table, num_pages = kc._pages_for(lengths, 203, CUDA)
    pool = layout.new_pool(num_pages, "fp8", CUDA)
    keys = torch.randn(lengths[0], 128, device=CUDA) * torch.rand(lengths[0], 1, device=CUDA) * 10
    store_index_k(keys, slots_of(table[0], lengths[0]), pool)
    q8, weights = kc.random_queries(1, 64, torch.Generator(device=CUDA).manual_seed(203), CUDA)
    lens_2d = torch.tensor(lengths, dtype=torch.int32, device=CUDA).view(-1, 1)
    theirs = da.dg_paged_logits(
        dg, q8.unsqueeze(1), pool, weights, lens_2d, table, da.dg_schedule(dg, lens_2d), 8192
    )
    scales = layout.as_page_rows(pool)[:, 64 * 128 :].view(torch.float32)
    scales.copy_(scales.roll(1, dims=1))
    shifted = torch.empty_like(theirs)
    paged_mqa_logits(q8.unsqueeze(1), pool, weights, lens_2d, table, None, 8192, out=shifted)
    assert (shifted - theirs).abs().max() / theirs.abs().max() > 0.1
