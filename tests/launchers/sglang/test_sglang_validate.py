"""`validate_on_gpu --sglang` on a CPU: SGLang 0.5.23's real configurator, pool, compressor store entry and
C4 indexer with the patch, at tiny sizes (kernels in Triton's interpreter, no peak memory without CUDA).

What needs CUDA (the allocation against the budget, the prefill's peak memory, full sizes) runs in
test_sglang_validate_gpu.py and `python -m launchers.sglang_gpu_checks.validate_on_gpu --sglang` (INTEGRATION.md).
"""

from __future__ import annotations

import pytest
import torch

from launchers import planner
from launchers.profiles import load_profiles
from launchers.sglang.kernels import reference as ref
from launchers.sglang_gpu_checks import sglang_harness as harness
from launchers.sglang_gpu_checks import sglang_validate

pytestmark = pytest.mark.sglang


def test_planner_equals_sglangs_configurator_for_fp8_and_bf16(sglang_available) -> None:
    checks = sglang_validate.configurator_checks(planner.DEFAULT_GPU_MEM_GIB)
    assert len(checks) == 8 and all(c.ok for c in checks), [c for c in checks if not c.ok]
    bf16 = [c for c in checks if c.item.startswith("bf16")]
    fp8 = [c for c in checks if c.item.startswith("fp8")]
    # the patch is on for the bf16 rows: fewer slots than fp8 at the same fraction
    assert int(bf16[0].value.split()[0].replace(",", "")) < int(fp8[0].value.split()[0].replace(",", ""))


def test_a_planner_that_drifts_from_sglang_is_caught(sglang_available, monkeypatch) -> None:
    monkeypatch.setattr(planner, "DSV4_MAX_RUNNING_REQUESTS", 128)  # SGLang sizes the HCA rings for 256
    checks = sglang_validate.configurator_checks(planner.DEFAULT_GPU_MEM_GIB)
    assert not any(c.ok for c in checks)


def test_planner_follows_a_profiles_max_running_requests_as_sglangs_configurator_does(
    sglang_available,
) -> None:
    profile = load_profiles()["dsv4-flash"]
    flash = harness.temp_config_dir()
    slots = {}
    for requests in (None, 64):
        extra = ("--max-running-requests", str(requests)) if requests else ()
        with harness.patch_state("fp8"):
            ours, sglang, sglang_requests = sglang_validate.kv_slots(
                profile.model_copy(update={"extra_args": extra, "mem_fraction_static": 0.85}),
                flash,
                "fp8",
                131072,
                planner.DEFAULT_GPU_MEM_GIB,
            )
        assert sglang_requests == (requests or planner.DSV4_MAX_RUNNING_REQUESTS)
        assert ours == sglang, (requests, ours, sglang)
        slots[requests] = sglang
    assert slots[64] > slots[None]  # fewer request slots leave more of the pool to tokens


@pytest.mark.parametrize("kind", ["fp8", "bf16"])
def test_sglangs_pool_sized_by_its_configurator_holds_256_or_132_bytes_per_key(
    sglang_available, kind
) -> None:
    config = harness.temp_config_dir(layers=2)
    with harness.patch_state(kind):
        setup = harness.resolve(config, 0.85, 131072)
        pool, checks = sglang_validate.build_pool(kind, setup, 512 << 20, torch.device("cpu"))
    per_token = checks[0]
    assert per_token.ok and per_token.target == {"fp8": "132", "bf16": "256"}[kind]
    assert pool.get_index_k_with_scale_buffer(0).shape[1] == 64 * int(per_token.target)


def test_a_configurator_left_at_132_bytes_under_a_bf16_pool_is_caught(sglang_available, monkeypatch) -> None:
    config = harness.temp_config_dir(layers=2)
    with harness.patch_state("bf16") as modules:
        configurator = next(m for m in modules if m.__name__.endswith("pool_configurator"))
        original = configurator.get_dsv4_indexer_bytes_per_token._recall_eval_bf16_original
        monkeypatch.setattr(configurator, "get_dsv4_indexer_bytes_per_token", original)  # budgets fp8 keys
        setup = harness.resolve(config, 0.85, 131072)
        _pool, checks = sglang_validate.build_pool("bf16", setup, 512 << 20, torch.device("cpu"))
    index = next(c for c in checks if "index pool allocated" in c.item)
    assert index.ok is False, index


def test_q_stand_in_is_rope_hadamard_and_fp8_with_the_scale_folded_into_the_weights() -> None:
    gen = torch.Generator().manual_seed(3)
    q = torch.randn(5, 4, 128, generator=gen).bfloat16()
    w = torch.randn(5, 4, generator=gen)
    angles = torch.rand(64, 32, generator=gen) * 6.2832
    freqs = torch.polar(torch.ones_like(angles), angles)
    pos = torch.tensor([0, 3, 17, 40, 63])
    q8, weights = harness.fused_q_standin(q, w, 0.5, freqs, pos)
    assert q8.dtype == torch.float8_e4m3fn and weights.shape == (5, 4, 1)
    # the same epilogue as the compressor's keys without the norm: compare against the fp64 reference
    ones = torch.ones(128)
    exact = torch.stack(
        [
            ref.norm_rope_hadamard(q[:, h].float(), ones, 0.0, torch.view_as_real(freqs).flatten(-2), pos)
            for h in range(4)
        ],
        dim=1,
    )
    rms = q.double().pow(2).mean(-1).sqrt()  # the RMSNorm norm_rope_hadamard applies, undone
    exact = exact * rms.unsqueeze(-1)
    dequant = q8.double() * (weights.squeeze(-1).double() / (w.double() * 0.5)).unsqueeze(-1)
    assert ((dequant - exact).abs() <= exact.abs().amax(-1, keepdim=True) * 2**-3).all()
    assert (weights.squeeze(-1) / (w * 0.5) - exact.abs().amax(-1).float() / 448).abs().max() < 1e-6


def test_quick_run_through_sglangs_indexer_passes_and_names_what_ran(sglang_available) -> None:
    result = sglang_validate.run(quick=True, device=torch.device("cpu"))
    assert not [c for c in result.checks if c.ok is False]
    runs = {(r.kind, r.mode): r for r in result.runs}
    assert runs["bf16", "prefill"].overlap_mean >= 0.99 and runs["bf16", "decode"].overlap_mean >= 0.99
    assert runs["bf16", "prefill"].logits_fn == "ragged_paged_mqa_logits"
    assert runs["fp8", "prefill"].logits_fn == "fp8_paged_mqa_logits_torch"
    text = sglang_validate.render(result)
    assert "forward_c4_indexer" in text and "Stood in for" in text and "FAIL" not in text


def test_sgl_kernel_placeholder_imports_but_refuses_every_call() -> None:
    from launchers.sglang import sgl_kernel_placeholder as placeholder

    if not placeholder.install_if_needed():
        pytest.skip("a real sgl_kernel is installed here")
    try:
        from sgl_kernel import int8_scaled_mm  # what SGLang's compressed_tensors_w8a8_int8 imports on CUDA

        with pytest.raises(placeholder.SglKernelMissing, match="int8_scaled_mm called, but sgl-kernel"):
            int8_scaled_mm(None)
        assert "sgl_kernel.int8_scaled_mm" in placeholder.imported_names()
    finally:
        placeholder.uninstall()
    assert not placeholder.installed()


def test_another_sglang_version_is_refused_in_one_line(sglang_available, monkeypatch, capsys) -> None:
    import sglang

    from launchers.sglang_gpu_checks.validate_on_gpu import main

    monkeypatch.setattr(sglang, "__version__", "0.5.24")
    assert main(["--sglang", "--quick"]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "written for SGLang 0.5.23, found 0.5.24" in err
