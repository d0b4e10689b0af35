"""An import-only stand-in for torchvision, for CPU test machines whose torch has no matching torchvision.

SGLang 0.5.23's `sglang.srt.configs` package imports its multimodal helpers, which import torchvision at
module level (`srt/multimodal/internvl_utils.py`), so the DeepSeek-V4 pool and indexer modules cannot be
imported without it, although nothing on their code paths uses it. The torchvision wheels reachable here
are CUDA builds that fail to load against the CPU build of torch. When (and only when) the real torchvision
cannot be imported, the tests install this finder: every `torchvision.*` module and attribute is an inert
placeholder. Any code that actually used one would get a placeholder back, never an image operation.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import sys
import types


class _PlaceholderMeta(type):
    def __getattr__(cls, name: str):
        if name.startswith("__"):
            raise AttributeError(name)
        return cls

    def __call__(cls, *args, **kwargs):
        return cls

    def __or__(cls, other):
        return cls

    __ror__ = __or__


class Placeholder(metaclass=_PlaceholderMeta):
    pass


class _PlaceholderModule(types.ModuleType):
    def __getattr__(self, name: str):
        if name.startswith("__"):
            raise AttributeError(name)
        return Placeholder


class _TorchvisionPlaceholderFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, fullname, path, target=None):
        if fullname == "torchvision" or fullname.startswith("torchvision."):
            return importlib.machinery.ModuleSpec(fullname, self, is_package=True)
        return None

    def create_module(self, spec):
        module = _PlaceholderModule(spec.name)
        module.__path__ = []
        module.__version__ = "0.0.0+placeholder"
        return module

    def exec_module(self, module):
        pass


def real_torchvision_loads() -> bool:
    if importlib.util.find_spec("torchvision") is None:
        return False
    try:
        import torchvision  # noqa: F401
    except Exception:
        for name in [n for n in sys.modules if n == "torchvision" or n.startswith("torchvision.")]:
            del sys.modules[name]
        return False
    return True


def install_if_needed() -> bool:
    """Install the placeholder unless the real torchvision imports; True if installed."""
    if real_torchvision_loads():
        return False
    if not any(isinstance(f, _TorchvisionPlaceholderFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, _TorchvisionPlaceholderFinder())
    return True
