"""The index-K kernels against their torch references, and the references against fp32 math.

On a machine without CUDA these run in Triton's CPU interpreter (conftest sets TRITON_INTERPRET=1), at
small sizes; on a GPU the same tests run the compiled kernels. Outputs are poisoned (NaN / 0xFF) first.
"""

from __future__ import annotations

import dataclasses

import pytest
import torch

from launchers.sglang.kernels import _logits_core, layout
from launchers.sglang.kernels import reference as ref
from launchers.sglang.kernels._logits_core import LogitsConfig, default_config, pages_per_program
from launchers.sglang.kernels.paged_logits import paged_mqa_logits
from launchers.sglang.kernels.ragged_logits import ragged_paged_mqa_logits
from launchers.sglang.kernels.store import store_index_k
from launchers.sglang_gpu_checks import kernel_checks as kc

DEVICE = torch.device("cuda" if torch.cuda.is_available() else "cpu")
KINDS = ("bf16", "fp8")


def test_layout_matches_sglang_bytes_per_token() -> None:
    # SGLang: get_dsv4_indexer_bytes_per_token(128, False) == 128 + 128 // 128 * 4
    assert layout.bytes_per_token("fp8") == 132
    assert layout.bytes_per_token("bf16") == 256
    assert layout.page_bytes("fp8") == 64 * 132
    assert layout.pool_kind(layout.new_pool(3, "bf16")) == "bf16"
    assert layout.pool_kind(layout.new_pool(3, "fp8").view(3, 64, 1, 132)) == "fp8"
    with pytest.raises(ValueError, match="neither fp8"):
        layout.pool_kind(torch.zeros(2, 1000, dtype=torch.uint8))


def test_reference_scores_match_explicit_fp32_loops() -> None:
    gen = torch.Generator().manual_seed(1)
    q, w, k = (
        torch.randn(2, 3, 128, generator=gen),
        torch.randn(2, 3, generator=gen),
        torch.randn(5, 128, generator=gen),
    )
    got = ref.index_scores(q, w, k)
    for t in range(2):
        for s in range(5):
            want = sum(float(w[t, h]) * max(float(q[t, h] @ k[s]), 0.0) for h in range(3))
            assert abs(float(got[t, s]) - want) <= 1e-4 * max(1.0, abs(want))


def test_reference_fp8_quantization_is_sglangs_rule() -> None:
    k = torch.tensor([[0.0] * 127 + [0.0], [1.0] * 64 + [-2.0] * 64])
    values, scale = ref.quantize_fp8_rows(k)
    assert scale[0].item() == pytest.approx(1e-4 / 448)  # amax floor
    assert scale[1].item() == pytest.approx(2.0 / 448)
    assert values[1].float().abs().max().item() == 448.0


def test_reference_hadamard_is_orthonormal_sylvester() -> None:
    h = ref.hadamard_matrix(128)
    assert torch.allclose(h @ h.T, torch.eye(128, dtype=torch.float64), atol=1e-12)
    assert h[0].eq(h[0, 0]).all() and h[1, 1] == -h[1, 0]


def test_reference_store_load_roundtrip() -> None:
    gen = torch.Generator().manual_seed(2)
    for kind in KINDS:
        pool = layout.new_pool(4, kind)
        k = torch.randn(50, 128, generator=gen)
        loc = torch.randperm(256, generator=gen)[:50]
        ref.store_keys(pool, k, loc)
        assert torch.equal(ref.load_keys(pool, loc), ref.stored_precision(k, kind))


@pytest.mark.parametrize("kind", KINDS)
def test_store_kernel_writes_reference_bytes(kind: str) -> None:
    check = kc.check_store(kind, 150, 3, DEVICE)
    assert check.bytes_equal_fraction == 1.0
    assert check.max_err_vs_exact < (5e-3 if kind == "bf16" else 7e-2)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("is_decode", [False, True])
def test_fused_norm_rope_hadamard_store(kind: str, is_decode: bool) -> None:
    check = kc.check_fused_store(kind, 48, is_decode, 4, DEVICE)
    # bf16: fp32 vs fp64 epilogue may flip a rounding at a near-tie; fp8 also moves the row scale by an ulp
    assert check.bytes_equal_fraction > (0.999 if kind == "bf16" else 0.99)
    assert check.max_err_vs_exact < (5e-3 if kind == "bf16" else 7e-2)


# the kernel math alone, against fp64 on the keys as stored: fp32 accumulation for bf16; Hopper's fp8
# tensor-core dot accumulates with reduced precision (seen on the H200: 3e-4 to 4e-3)
KERNEL_ONLY_LIMIT = {"bf16": 1e-5, "fp8": 1e-2 if DEVICE.type == "cuda" else 1e-5}
# the launch shapes validate_on_gpu.py sweeps: both product orientations, 1-4 pages per step
CONFIGS = [
    LogitsConfig(keys_as_rows=False),
    LogitsConfig(keys_as_rows=True, pages_per_iter=2, max_pages_per_program=2),
    LogitsConfig(keys_as_rows=True, pages_per_iter=4, block_q=4, num_warps=8),
    # launch options: on a GPU, a programmatic dependent launch and evict-first key loads; interpreted,
    # PDL is left off (the interpreter has no grid dependency control) and must not change the numbers
    LogitsConfig(keys_as_rows=True, pdl=True, stream_keys=True),
]
CONFIG_IDS = ["q-rows", "keys-rows-2pages", "keys-rows-4pages", "pdl-evict-first"]


@pytest.mark.parametrize("config", CONFIGS, ids=CONFIG_IDS)
@pytest.mark.parametrize("kind", KINDS)
def test_paged_logits(kind: str, config: LogitsConfig) -> None:
    check = kc.check_paged(kind, [300, 64, 1, 129, 700], 16, (64,), 5, DEVICE, config)
    assert check.all_written
    assert check.rel_err_vs_stored < KERNEL_ONLY_LIMIT[kind]
    assert check.rel_err_vs_fp32 < (1e-2 if kind == "bf16" else 8e-2)


def test_even_splits_share_the_pages_of_the_same_grid() -> None:
    """44 pages over 5 requests, 16 programs wanted (2 SMs here, 8 per SM): capped splits of 14, 14, 14
    and 2 pages become four of 11; a split never walks more pages than before, and no split is empty."""
    capped = LogitsConfig(keys_as_rows=True)
    even = LogitsConfig(keys_as_rows=True, even_splits=True)
    cpu = torch.device("cpu")
    assert pages_per_program(44, 5, False, capped, cpu) == 14
    assert pages_per_program(44, 5, False, even, cpu) == 11
    for pages in range(1, 300):
        for step in (1, 2, 4):
            for cap in (3, 32, 1024):
                c = LogitsConfig(pages_per_iter=step, max_pages_per_program=cap)
                e = LogitsConfig(pages_per_iter=step, max_pages_per_program=cap, even_splits=True)
                before, after = (
                    pages_per_program(pages, 3, False, c, cpu),
                    pages_per_program(pages, 3, False, e, cpu),
                )
                assert after <= before and after % step == 0
                assert -(-pages // after) == -(-pages // before)  # the same grid
                assert (-(-pages // after) - 1) * after < pages  # the last split is not empty


# (keys per request, requests) -> (stages, pages per program, programs in the grid) of the tuned bf16
# decode launch on an H200's 132 SMs: 2 stages and programs of <= 32 pages up to 16896 pages in a call,
# above that 3 stages and <= 256 pages (the anchor sweep's winner, KERNELS.md)
H200_BF16_DECODE_SHAPES = {
    (131072, 1): (2, 4, 512),
    (524288, 1): (2, 16, 512),
    (131072, 8): (2, 32, 512),  # 16384 pages: 32 per program, the old cap, does not bind yet
    (32768, 33): (2, 32, 528),  # 16896 pages: the last call of the small shape
    (131072, 9): (3, 35, 531),  # 18432 pages: the cap of 32 would bind
    (131072, 64): (3, 249, 576),
    (262144, 64): (3, 256, 1024),
    (524288, 16): (3, 249, 528),
    (524288, 64): (3, 256, 2048),
}


@pytest.mark.parametrize(("call", "shape"), H200_BF16_DECODE_SHAPES.items(), ids=str)
def test_tuned_bf16_decode_shape_per_call_size(monkeypatch, call, shape) -> None:
    monkeypatch.setattr(_logits_core, "_num_sms", lambda device: 132)
    keys, requests = call
    pages = keys // layout.INDEX_PAGE_SIZE
    tuned = default_config("bf16", ragged=False)
    config = tuned.for_decode_call(pages * requests, 132)
    per_program = pages_per_program(pages, requests, False, config, torch.device("cpu"))
    assert (config.num_stages, per_program, requests * -(-pages // per_program)) == shape
    assert not config.even_splits  # with a cap >= 256 it ran at 68% of copy bandwidth on the H200


def test_large_call_shape_only_where_set() -> None:
    for kind, ragged in (("fp8", False), ("bf16", True), ("fp8", True)):
        config = default_config(kind, ragged)
        assert config.for_decode_call(1 << 30, 132) is config
    fixed = LogitsConfig(large_call_stages=None, large_call_max_pages=None)
    assert fixed.for_decode_call(1 << 30, 132) is fixed


@pytest.mark.parametrize("kind", KINDS)
def test_paged_logits_tuned_large_call(kind: str) -> None:
    """The tuned decode shape through a call large enough for its large-call stages and cap on this
    device (two requests just over programs_per_sm x SMs x 32 pages together)."""
    config = dataclasses.replace(default_config("bf16", ragged=False), pdl=False)
    threshold = config.programs_per_sm * _logits_core._num_sms(DEVICE) * config.max_pages_per_program
    pages = threshold // 2 + 1
    assert config.for_decode_call(2 * pages, _logits_core._num_sms(DEVICE)).num_stages == 3
    lengths = [pages * layout.INDEX_PAGE_SIZE, pages * layout.INDEX_PAGE_SIZE - 37]
    check = kc.check_paged(kind, lengths, 16, (64,), 7, DEVICE, config)
    assert check.all_written
    assert check.rel_err_vs_stored < KERNEL_ONLY_LIMIT[kind]


@pytest.mark.parametrize("kind", KINDS)
def test_paged_logits_with_even_splits(kind: str) -> None:
    config = LogitsConfig(keys_as_rows=True, even_splits=True)
    check = kc.check_paged(kind, [300, 64, 1, 129, 700], 16, (64,), 5, DEVICE, config)
    assert check.all_written
    assert check.rel_err_vs_stored < KERNEL_ONLY_LIMIT[kind]


@pytest.mark.parametrize("config", CONFIGS, ids=CONFIG_IDS)
@pytest.mark.parametrize("kind", KINDS)
def test_ragged_logits(kind: str, config: LogitsConfig) -> None:
    check = kc.check_ragged(kind, 400, 9, 16, (64,), 6, DEVICE, config)
    assert check.all_written
    assert check.rel_err_vs_stored < KERNEL_ONLY_LIMIT[kind]
    assert check.rel_err_vs_fp32 < (1e-2 if kind == "bf16" else 8e-2)


def test_ragged_matches_paged_over_several_requests_at_sixty_four_heads() -> None:
    """Requests of 0, 5 and 7 query rows; every row through both kernels must agree."""
    gen = torch.Generator(device=DEVICE).manual_seed(7)
    pool = layout.new_pool(24, "bf16", DEVICE)
    store_index_k(
        torch.randn(24 * 64, 128, generator=gen, device=DEVICE), torch.arange(24 * 64, device=DEVICE), pool
    )
    table = torch.randperm(24, generator=torch.Generator().manual_seed(7)).int().view(3, 8).to(DEVICE)
    cu = torch.tensor([0, 0, 5, 12], dtype=torch.int32, device=DEVICE)
    lens = torch.tensor(
        [70, 71, 72, 73, 74, 200, 300, 400, 450, 500, 511, 512], dtype=torch.int32, device=DEVICE
    )
    q = torch.randn(12, 64, 128, generator=gen, device=DEVICE).bfloat16()
    w = torch.randn(12, 64, generator=gen, device=DEVICE)
    ragged = torch.full((12, 512), float("nan"), device=DEVICE)
    ragged_paged_mqa_logits(q, pool, w, lens, table[:3], cu, 7, 512, out=ragged)
    row_table = torch.cat([table[1].expand(5, -1), table[2].expand(7, -1)])
    paged = torch.full((12, 512), float("nan"), device=DEVICE)
    paged_mqa_logits(q.unsqueeze(1), pool, w, lens.view(-1, 1), row_table, None, 512, out=paged)
    assert torch.equal(ragged.isnan(), paged.isnan())
    assert torch.allclose(ragged.nan_to_num(), paged.nan_to_num(), rtol=1e-5, atol=1e-4)


def test_paged_logits_rejects_what_sglang_never_passes() -> None:
    pool = layout.new_pool(2, "bf16", DEVICE)
    q = torch.zeros(1, 2, 16, 128, device=DEVICE)
    lens, table, w = (
        torch.ones(1, 1, dtype=torch.int32, device=DEVICE),
        torch.zeros(1, 2, dtype=torch.int32, device=DEVICE),
        torch.zeros(1, 16, device=DEVICE),
    )
    with pytest.raises(ValueError, match="next_n=1"):
        paged_mqa_logits(q, pool, w, lens, table, None, 128)
    with pytest.raises(ValueError, match="clean_logits"):
        paged_mqa_logits(q[:, :1], pool, w, lens, table, None, 128, True)
