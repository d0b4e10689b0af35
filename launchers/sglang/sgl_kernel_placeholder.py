"""An import-only stand-in for `sgl_kernel`, for a GPU machine where SGLang's compiled kernel package is absent.

On CUDA, SGLang 0.5.23's DeepSeek-V4 pool and indexer modules reach `sgl_kernel` at import time through
modules they never use here: `mem_cache.memory_pool` -> `layers.quantization` ->
`compressed_tensors_w8a8_int8` (`from sgl_kernel import int8_scaled_mm`), and the like. The device image
has no sgl-kernel build for its torch (2.11 + CUDA 13), so those imports fail and nothing DeepSeek-V4 loads.

`install_if_needed()` puts a finder first on `sys.meta_path` only when the real package cannot be found:
every `sgl_kernel.*` module is a placeholder whose every name is a `Missing` op. Importing one works;
calling one raises a one-line error naming the op, so a validation that passes proves that no sgl-kernel
code ran. `imported_names()` lists what SGLang took from it.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import sys
import types

_NAMES: set[str] = set()


class SglKernelMissing(RuntimeError):
    """An sgl-kernel op was called where only the import placeholder exists."""


class Missing:
    """A name taken from the placeholder: importable, never callable."""

    def __init__(self, name: str):
        self._name = name
        _NAMES.add(name)

    def __call__(self, *args, **kwargs):
        raise SglKernelMissing(
            f"{self._name} called, but sgl-kernel is not installed here (only an import placeholder): "
            "install sgl-kernel for this torch, or keep this code path off"
        )

    def __getattr__(self, attr: str):
        if attr.startswith("__"):
            raise AttributeError(attr)
        return Missing(f"{self._name}.{attr}")

    def __repr__(self) -> str:
        return f"<sgl_kernel placeholder {self._name}>"


class _PlaceholderModule(types.ModuleType):
    def __getattr__(self, name: str):
        if name.startswith("__"):
            raise AttributeError(name)
        return Missing(f"{self.__name__}.{name}")


class _Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, fullname, path, target=None):
        if fullname == "sgl_kernel" or fullname.startswith("sgl_kernel."):
            return importlib.machinery.ModuleSpec(fullname, self, is_package=True)
        return None

    def create_module(self, spec):
        module = _PlaceholderModule(spec.name)
        module.__path__ = []
        module.__version__ = "0.0.0+recall-eval-placeholder"
        return module

    def exec_module(self, module):
        pass


def installed() -> bool:
    return any(isinstance(f, _Finder) for f in sys.meta_path)


def install_if_needed() -> bool:
    """Install the placeholder unless a real sgl_kernel is importable; True if the placeholder is in use."""
    if installed():
        return True
    if importlib.util.find_spec("sgl_kernel") is not None:
        return False
    sys.meta_path.insert(0, _Finder())
    return True


def uninstall() -> None:
    """Remove the placeholder and the modules it made (tests use this)."""
    sys.meta_path[:] = [f for f in sys.meta_path if not isinstance(f, _Finder)]
    for name in [n for n, m in sys.modules.items() if isinstance(m, _PlaceholderModule)]:
        del sys.modules[name]


def imported_names() -> list[str]:
    return sorted(_NAMES)
