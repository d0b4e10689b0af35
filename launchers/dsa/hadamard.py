"""Hadamard rotation of indexer queries and keys.

DeepSeek's indexer rotates q and k by an orthonormal Hadamard matrix before quantizing them:
q.k is unchanged (H is orthonormal), but outlier channels are spread over all dimensions, so a
single fp8 scale per row loses less. SGLang's fused kernels do the same 128-point transform
scaled by 1/sqrt(128).
"""

from __future__ import annotations

import functools

import torch


@functools.cache
def _hadamard_fp32(n: int) -> torch.Tensor:
    if n < 1 or n & (n - 1):
        raise ValueError(f"Hadamard size must be a power of two, got {n}")
    with torch.inference_mode(False):  # a cached tensor must stay usable outside inference mode
        h = torch.ones(1, 1)
        while h.shape[0] < n:  # Sylvester construction: [[H, H], [H, -H]]
            h = torch.cat([torch.cat([h, h], 1), torch.cat([h, -h], 1)], 0)
        return h / n**0.5


@functools.cache
def hadamard_matrix(
    n: int, device: torch.device | str = "cpu", dtype: torch.dtype = torch.float32
) -> torch.Tensor:
    """The orthonormal n x n Sylvester-Hadamard matrix (symmetric, its own inverse); cached per device."""
    with torch.inference_mode(False):
        return _hadamard_fp32(n).to(device=device, dtype=dtype)


def rotate(x: torch.Tensor) -> torch.Tensor:
    """Apply the orthonormal Hadamard transform to the last dimension of x."""
    return x @ hadamard_matrix(x.shape[-1], x.device, x.dtype)
