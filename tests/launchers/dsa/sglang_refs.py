"""Import SGLang 0.5.23's torch reference functions for the DSA indexer.

`sglang.srt.layers.attention.dsv4.indexer` imports, through `sglang.srt.configs`, multimodal
model configs that import torchvision at module level. The indexer functions never touch
torchvision; on a machine where torchvision is missing or does not load (a CUDA build next to
CPU torch), a placeholder package is put on the import path for that one import, so that the
test still exercises SGLang's real code.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
import types
from collections.abc import Callable
from typing import Any

from tests import prerequisites


class _Placeholder(types.ModuleType):
    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return type(name, (), {})


class _PlaceholderFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(
        self, fullname: str, path: Any = None, target: Any = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname == "torchvision" or fullname.startswith("torchvision."):
            return importlib.machinery.ModuleSpec(fullname, self, is_package=True)
        return None

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        return _Placeholder(spec.name)

    def exec_module(self, module: types.ModuleType) -> None:
        module.__path__ = []  # type: ignore[attr-defined]


def _torchvision_loads() -> bool:
    try:
        importlib.import_module("torchvision")
        return True
    except Exception:  # noqa: BLE001 - a broken torchvision raises RuntimeError or OSError, not ImportError
        for name in [m for m in sys.modules if m == "torchvision" or m.startswith("torchvision.")]:
            del sys.modules[name]
        return False


def sglang_reference_functions() -> tuple[Callable[..., Any], Callable[..., Any]]:
    """(_fp8_mqa_logits_torch, fp8_paged_mqa_logits_torch); skips only if sglang is not installed."""
    if not prerequisites.sglang_installed():
        prerequisites.missing("sglang", "sglang is not installed (pip install --no-deps sglang==0.5.23)")
    if not _torchvision_loads():
        from transformers.utils import import_utils

        import_utils.is_torchvision_available()  # let transformers record the truth before the placeholder
        finder = _PlaceholderFinder()
        sys.meta_path.insert(0, finder)
    utils = importlib.import_module("sglang.srt.layers.attention.dsa.utils")
    indexer = importlib.import_module("sglang.srt.layers.attention.dsv4.indexer")
    return utils._fp8_mqa_logits_torch, indexer.fp8_paged_mqa_logits_torch
