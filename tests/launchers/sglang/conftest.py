"""Shared setup for the SGLang bf16 index-K tests.

Without CUDA the Triton kernels run in Triton's CPU interpreter: TRITON_INTERPRET must be set before any
kernel module is imported (triton.jit reads it at decoration time), so it is set here, at collection.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from types import ModuleType

import pytest
import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

from tests import prerequisites  # noqa: E402
from tests.launchers.sglang import torchvision_placeholder  # noqa: E402


@pytest.fixture(scope="session")
def sglang_available() -> None:
    if not prerequisites.sglang_installed():
        prerequisites.missing("sglang", "sglang is not installed (pip install --no-deps sglang==0.5.23)")
    torchvision_placeholder.install_if_needed()


@pytest.fixture
def bf16_patch(sglang_available: None) -> Iterator[list[ModuleType]]:
    """The patch applied to SGLang's real modules for one test, and taken off again after it."""
    from launchers.sglang import bf16_index_k

    modules = bf16_index_k.apply()
    try:
        yield modules
    finally:
        for module in modules:
            bf16_index_k.unpatch_module(module)
