"""fp8 e4m3 row quantization with SGLang's scale rule (scale = max(amax, 1e-4) / 448)."""

from __future__ import annotations

import torch

from launchers.dsa.fp8 import FP8_E4M3_MAX, dequantize_rows_e4m3, quantize_rows_e4m3
from launchers.dsa.hadamard import hadamard_matrix, rotate


def test_scale_is_amax_over_448_per_row() -> None:
    x = torch.randn(64, 128, generator=torch.Generator().manual_seed(0)) * torch.logspace(
        -3, 3, 64
    ).unsqueeze(1)
    q, scale = quantize_rows_e4m3(x)
    assert q.dtype == torch.float8_e4m3fn and scale.dtype == torch.float32
    assert torch.equal(scale, x.abs().amax(-1) / 448.0)
    # the largest element of every row maps to +-448 exactly
    assert torch.equal(q.float().abs().amax(-1), torch.full((64,), FP8_E4M3_MAX))


def test_round_trip_within_e4m3_precision() -> None:
    x = torch.randn(256, 128, generator=torch.Generator().manual_seed(1))
    q, scale = quantize_rows_e4m3(x)
    back = dequantize_rows_e4m3(q, scale)
    # e4m3 keeps 3 mantissa bits: relative error <= 2^-4 for normal values; subnormals bounded by scale * 2^-9
    bound = x.abs() * 2.0**-4 + scale.unsqueeze(-1) * 2.0**-9
    assert bool(((back - x).abs() <= bound).all())


def test_tiny_rows_use_the_amax_floor() -> None:
    q, scale = quantize_rows_e4m3(torch.zeros(3, 128))
    assert torch.allclose(scale, torch.full((3,), 1e-4 / 448.0))
    assert bool((q.float() == 0).all())


def test_hadamard_is_orthonormal_and_keeps_dot_products() -> None:
    h = hadamard_matrix(128)
    assert torch.allclose(h @ h.T, torch.eye(128), atol=1e-6)
    assert torch.allclose(h.abs(), torch.full((128, 128), 128**-0.5))
    g = torch.Generator().manual_seed(2)
    a, b = torch.randn(10, 128, generator=g), torch.randn(10, 128, generator=g)
    assert torch.allclose((rotate(a) * rotate(b)).sum(-1), (a * b).sum(-1), atol=1e-4)
