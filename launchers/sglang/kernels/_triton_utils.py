"""Small Triton helpers shared by the index-K kernels.

Triton's CPU interpreter (TRITON_INTERPRET=1, numpy underneath) gets three things wrong that these kernels
use, seen with Triton 3.9: fp32 -> bf16 casts truncate instead of rounding to nearest even, fp32 -> fp8
e4m3 casts round wrongly at binade edges, and bf16 x bf16 `tl.dot` returns garbage. Under the interpreter
the kernels therefore round on the bits (the functions below) and feed fp32 to `tl.dot` (exact: every
bf16 and fp8 value is an fp32 value, and the products are the same). On a GPU they use the hardware
casts and bf16 / fp8 tensor-core dots.
"""

from __future__ import annotations

import functools
import os

import torch
import triton
import triton.language as tl

try:  # grid dependency control (programmatic dependent launch), Triton >= 3.4
    from triton.language.extra.cuda import gdc_launch_dependents, gdc_wait
except ImportError:  # pragma: no cover - older Triton: kernels are never built with PDL=True then

    @triton.jit
    def gdc_wait():
        pass

    @triton.jit
    def gdc_launch_dependents():
        pass

    _HAS_GDC = False
else:
    _HAS_GDC = True


@triton.jit
def prefetch_l2(ptrs, mask):
    """Ask the L2 to fetch the 128-byte lines at `ptrs` (where `mask`), without waiting or writing
    registers. Safe before a grid dependency wait: the L2 is where the GPU's global memory is coherent,
    so a line the previous kernel writes afterwards is updated there, never read stale."""
    tl.inline_asm_elementwise(
        "{ .reg .pred p; setp.ne.b32 p, $2, 0; @p prefetch.global.L2 [$1]; mov.u32 $0, 0; }",
        "=r,l,r",
        [ptrs, mask.to(tl.int32)],
        dtype=tl.int32,
        is_pure=False,
        pack=1,
    )


try:  # host-side TMA descriptors, Triton >= 3.4
    from triton.tools.tensor_descriptor import TensorDescriptor
except ImportError:  # pragma: no cover - older Triton: kernels are never built with KEYS_TMA=True then
    TensorDescriptor = None


def interpreting() -> bool:
    return os.environ.get("TRITON_INTERPRET") == "1"


@functools.cache
def _hopper_or_newer(device_index: int) -> bool:
    return torch.cuda.get_device_capability(device_index)[0] >= 9


def pdl_supported(device: torch.device) -> bool:
    """Programmatic dependent launch needs a Hopper+ GPU and a Triton that knows it; never interpreted."""
    if device.type != "cuda" or interpreting() or not _HAS_GDC:
        return False
    return _hopper_or_newer(device.index if device.index is not None else torch.cuda.current_device())


def tma_supported(device: torch.device) -> bool:
    """TMA key loads need a Hopper+ GPU and a Triton with host-side tensor descriptors."""
    if device.type != "cuda" or interpreting() or TensorDescriptor is None:
        return False
    return _hopper_or_newer(device.index if device.index is not None else torch.cuda.current_device())


@triton.jit
def to_bf16(x, BIT_EXACT: tl.constexpr):
    """fp32 -> bf16, round to nearest even."""
    if BIT_EXACT:
        bits = x.to(tl.int32, bitcast=True)
        rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
        return rounded.to(tl.int16).to(tl.bfloat16, bitcast=True)
    else:
        return x.to(tl.bfloat16)


@triton.jit
def to_e4m3_bits(x, BIT_EXACT: tl.constexpr):
    """fp32 (|x| <= 448 after scaling) -> fp8 e4m3fn code as uint8, round to nearest even, saturating."""
    if BIT_EXACT:
        bits = x.to(tl.int32, bitcast=True)
        sign = ((bits >> 31) & 1) << 7
        a = tl.abs(x)
        abits = a.to(tl.int32, bitcast=True)
        # normal numbers: keep exponent + 3 mantissa bits, rebias 127 -> 7
        normal = tl.minimum(((abits + 0x7FFFF + ((abits >> 20) & 1)) >> 20) - (120 << 3), 0x7E)
        # subnormals (|x| < 2^-6) count units of 2^-9; adding 2^23 rounds to an integer, to nearest even
        sub = ((a * 512.0 + 8388608.0) - 8388608.0).to(tl.int32)
        return (tl.where(a >= 0.015625, normal, sub) | sign).to(tl.uint8)
    else:
        return x.to(tl.float8e4nv).to(tl.uint8, bitcast=True)
