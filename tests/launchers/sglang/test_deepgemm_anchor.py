"""The DeepGEMM anchor's own plumbing, on any device: what it hands DeepGEMM must be the pool's keys.

DeepGEMM itself runs only in test_deepgemm_anchor_gpu.py (Hopper, `deep_gemm` importable).
"""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from launchers.sglang.kernels import layout
from launchers.sglang.kernels import reference as ref
from launchers.sglang.kernels._logits_core import default_config
from launchers.sglang.kernels.store import store_index_k
from launchers.sglang_gpu_checks import deepgemm_anchor as da
from launchers.sglang_gpu_checks import kernel_bench as kb

REPO = Path(__file__).resolve().parents[3]


def _fp8_pool_with_keys(n: int, pages: int, seed: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    table = torch.randperm(pages, generator=gen).to(torch.int32)
    keys = torch.randn(n, 128, generator=gen) * torch.rand(n, 1, generator=gen) * 5
    pool = layout.new_pool(pages, "fp8")
    store_index_k(keys, ref.slots_of(table, n), pool)
    return pool, table, keys


def test_gather_keys_returns_a_requests_keys_in_order() -> None:
    pool, table, keys = _fp8_pool_with_keys(300, 6, 1)
    k8, scale = da.gather_keys(pool, table, 300)
    assert k8.dtype == torch.float8_e4m3fn and k8.shape == (300, 128) and k8.is_contiguous()
    assert scale.dtype == torch.float32 and scale.shape == (300,) and scale.is_contiguous()
    got = k8.float() * scale[:, None]
    assert torch.equal(got, ref.load_keys(pool, ref.slots_of(table, 300)))
    assert torch.allclose(got, keys, rtol=0.07, atol=0.07 * keys.abs().max().item())


def test_bf16_copy_holds_the_same_keys_as_the_fp8_pool() -> None:
    pool8 = kb.random_pool("fp8", 5, torch.device("cpu"), 2)
    pool16 = da.bf16_copy_of(pool8)
    assert layout.pool_kind(pool16) == "bf16"
    slots = torch.arange(5 * layout.INDEX_PAGE_SIZE)
    want = ref.load_keys(pool8, slots).to(torch.bfloat16).float()
    assert torch.equal(ref.load_keys(pool16, slots), want)


def test_kv_view_is_the_shape_sglang_hands_deepgemm() -> None:
    view = da.kv_view(layout.new_pool(3, "fp8"))
    assert view.shape == (3, 64, 1, 132)
    assert view.stride(1) == 132 and view.stride(3) == 1  # what DeepGEMM asserts on the fused cache


def test_load_deep_gemm_says_why_it_is_unusable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "deep_gemm", None)  # import fails as when it is not installed
    module, why = da.load_deep_gemm()
    assert module is None
    assert why.startswith("deep_gemm does not import: ")


@pytest.mark.skipif(importlib.util.find_spec("deep_gemm") is not None, reason="deep_gemm is installed here")
def test_benchmark_skips_with_one_line_without_deep_gemm() -> None:
    done = subprocess.run(
        [sys.executable, str(REPO / "tests/benchmarks/bench_deepgemm_anchor.py")],
        capture_output=True, text=True, timeout=300, cwd=REPO,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("SKIP: deep_gemm does not import")
    assert done.stdout.count("\n") == 1


def _decode_row(keys: int, batch: int, fixed_s: float, rate_gbs: dict[str, float]) -> dict:
    row: dict = {"keys": keys, "batch": batch}
    for col, kind in (("dg", "fp8"), ("fp8", "fp8"), ("bf16", "bf16")):
        moved = keys * batch * (layout.bytes_per_token(kind) + 4)
        row[col] = {"ms": (fixed_s + moved / (rate_gbs[col] * 1e9)) * 1e3}
    return row


def test_streaming_fit_splits_a_per_call_cost_from_the_stream_rate() -> None:
    rates = {"dg": 4200.0, "fp8": 3600.0, "bf16": 4000.0}
    rows = [_decode_row(k, b, 12e-6, rates) for k in (4096, 131072, 524288) for b in (1, 16, 64)]
    rows[0]["bf16"]["ms"] = 1.0  # a short call is left out of the fit: it would pull it far off
    for col, rate in rates.items():
        fit = da.streaming_fit(rows, col)
        assert fit["points"] == 4  # 128K and 512K keys x 16 and 64 requests
        assert fit["fixed_us"] == pytest.approx(12.0, rel=1e-6)
        assert fit["rate_gbs"] == pytest.approx(rate, rel=1e-9)
        assert fit["r2"] == pytest.approx(1.0)
    with pytest.raises(ValueError, match="needs two decode calls"):
        da.streaming_fit(rows[:3], "bf16")


def rerender(saved_run: str) -> subprocess.CompletedProcess[str]:
    """The benchmark's --from-json on a committed run (launchers/sglang_gpu_checks/NAME.json): exit 0."""
    done = subprocess.run(
        [sys.executable, str(REPO / "tests/benchmarks/bench_deepgemm_anchor.py"),
         "--from-json", str(REPO / f"launchers/sglang_gpu_checks/{saved_run}.json")],
        capture_output=True, text=True, timeout=300, cwd=REPO,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return done


def test_benchmark_re_renders_the_committed_h200_run_without_a_gpu() -> None:
    done = rerender("anchor_h200")
    assert "| 524288 | 64 | 1086.0 | 4202 | 98% |" in done.stdout  # the decode table, as in KERNELS.md
    assert "| DeepGEMM fp8 | 6 | 12.5 | 4245 | 99.3% |" in done.stdout
    assert "| our bf16 | 6 | 10.7 | 4106 | 96.1% |" in done.stdout
    assert "pages/program <= 256 pdl." in done.stdout  # the shape that run timed at every call


def test_benchmark_re_renders_the_committed_h100_run_with_its_deepgemm_commit() -> None:
    """The 2026-12-07 run: DeepGEMM built from source in the same device call; the report names the
    commit it was built from, and the prefill ratios come from that one call."""
    done = rerender("anchor_h100")
    assert "NVIDIA H100 80GB HBM3" in done.stdout
    assert "built from deepseek-ai/DeepGEMM@54e22612409371d6364144b69086735beb54e98b" in done.stdout
    assert "| 22528 | 5632 | 1.06 | 0.017 | 1.45 | 1.89 | 1.79 | 1.37 |" in done.stdout
    assert "| 131072 | 1 | 9.6 | 1862 | 61% |" in done.stdout


def test_benchmark_re_renders_the_committed_h200_sweep_without_a_gpu() -> None:
    done = rerender("anchor_h200_sweep")
    assert "| 32 | 2 | no | 555.2, 91.9%, 4096 | 1093.8, 93.3%, 8192 |" in done.stdout  # the old shape
    assert "| 256 | 3 | no | 545.6, 93.6%, 576 | 1075.0, 95.0%, 1024 |" in done.stdout  # the large-call one


def test_benchmark_re_renders_the_committed_h200_rule_run_without_a_gpu() -> None:
    done = rerender("anchor_h200_rule")
    assert "calls where that cap binds: stages=3 pages/program <= 256." in done.stdout
    assert "| 131072 | 1 | 7.8 | 2296 | 54% | 10.0 | 42% | 12.0 | 2851 | 67% |" in done.stdout
    assert "| our bf16 | 6 | 9.6 | 4101 | 96.0% |" in done.stdout


def test_fixed_shape_launches_alike_at_every_call_size() -> None:
    tuned = default_config("bf16", ragged=False)
    assert tuned.for_decode_call(1 << 20, 132).num_stages == 3  # the tuned rule: large calls differ
    fixed = da.fixed_shape(tuned, num_stages=3)
    for pages in (64, 16896, 1 << 20):
        shape = fixed.for_decode_call(pages, 132)
        assert (shape.num_stages, shape.max_pages_per_program) == (3, 32)


def test_benchmark_renders_a_split_sweep(tmp_path: Path) -> None:
    result = json.loads((REPO / "launchers/sglang_gpu_checks/anchor_h200.json").read_text())
    result["bf16_decode_config"] = dataclasses.asdict(default_config("bf16", ragged=False))
    result["split_sweep"] = {
        "points": [[524288, 64]],
        "rows": [
            {
                "max_pages": 32,
                "stages": 2,
                "even_splits": False,
                "programs": [16384],
                "ms": [2.1336960792541504],
            },
            {"max_pages": 128, "stages": 2, "even_splits": True, "programs": [4096], "ms": [2.1]},
        ],
    }
    saved = tmp_path / "anchor.json"
    saved.write_text(json.dumps(result))
    done = subprocess.run(
        [sys.executable, str(REPO / "tests/benchmarks/bench_deepgemm_anchor.py"), "--from-json", str(saved)],
        capture_output=True, text=True, timeout=300, cwd=REPO,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "| pages/program cap | stages | even splits | 524288x64 (DG 98.3%) |" in done.stdout
    assert "| 32 | 2 | no | 2133.7, 95.7%, 16384 |" in done.stdout  # the table's own bf16 time
    assert "| 128 | 2 | yes | 2100.0, 97.2%, 4096 |" in done.stdout
    assert (
        "pages/program <= 32 pdl; calls where that cap binds: stages=3 pages/program <= 256." in done.stdout
    )
