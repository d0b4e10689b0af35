"""recall-eval's bf16 index-K patch for SGLang 0.5.23's DeepSeek-V4 (active when SGLANG_DSV4_BF16_INDEX_K=1).

The launcher puts `launchers/sglang/patch` on the server's PYTHONPATH; its `sitecustomize` calls
`activate()`, which checks SGLang's version at once and then patches each target module right after
SGLang imports it, after checking that every function it replaces is there with the parameters this
patch was written against. Anything unexpected refuses to start with one line (`PatchRefused`).
`python -m launchers.sglang.bf16_index_k --check` runs the same checks eagerly, without a GPU.
README.md beside this file lists what is replaced and why.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.abc
import importlib.metadata
import inspect
import os
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from launchers.sglang.refusal import PatchRefused, announce

ENV_VAR = "SGLANG_DSV4_BF16_INDEX_K"
SUPPORTED_SGLANG = "0.5.23"
PATCH_DIR = Path(__file__).resolve().parent / "patch"  # holds the sitecustomize.py the server must see
MARK = "_recall_eval_bf16_original"  # attribute on a replacement pointing at what it replaced

POOL = "sglang.srt.mem_cache.deepseek_v4_memory_pool"
CONFIGURATOR = "sglang.srt.model_executor.pool_configurator"
COMPRESSOR = "sglang.srt.layers.attention.dsv4.compressor_v2"
INDEXER = "sglang.srt.layers.attention.dsv4.indexer"


@dataclass(frozen=True)
class Target:
    """One name in one SGLang module that the patch replaces (or relies on, when `make` is None)."""

    module: str
    path: str  # attribute path inside the module, e.g. "DeepSeekV4IndexerPool._create_buffer"
    params: tuple[str, ...]  # the parameters the patch was written against, in order
    make: Callable[[Callable[..., Any], ModuleType], Callable[..., Any]] | None = None
    called_from: tuple[str, ...] = ()  # functions in `module` that must call this name as a global

    @property
    def qualname(self) -> str:
        return f"{self.module}.{self.path}"


def _runtime() -> ModuleType:
    # imported only when a target module is patched: it pulls in torch, triton and the kernels
    return importlib.import_module("launchers.sglang.bf16_runtime")


def _guard(name: str) -> Callable[[Callable[..., Any], ModuleType], Callable[..., Any]]:
    return lambda original, _mod: _runtime().fp8_only_guard(original, name)


TARGETS: tuple[Target, ...] = (
    Target(
        POOL, "get_dsv4_indexer_bytes_per_token", ("index_head_dim", "use_fp4_indexer"),
        lambda original, _mod: _runtime().bytes_per_token_fn(original),
        called_from=("DeepSeekV4IndexerPool.get_bytes_per_token",),
    ),
    Target(
        POOL, "DeepSeekV4IndexerPool._create_buffer", ("self",),
        lambda original, _mod: _runtime().create_buffer_fn(original),
    ),
    Target(POOL, "DeepSeekV4IndexerPool.get_index_k_scale_buffer",
           ("self", "layer_id", "seq_len_tensor", "page_indices", "seq_len_sum", "max_seq_len"),
           _guard("get_index_k_scale_buffer")),
    Target(POOL, "DeepSeekV4IndexerPool.set_index_k_scale_buffer",
           ("self", "layer_id", "loc", "index_k", "index_k_scale"), _guard("set_index_k_scale_buffer")),
    Target(POOL, "DeepSeekV4IndexerPool.set_index_fused", ("self", "layer_id", "loc", "cache_k"),
           _guard("set_index_fused")),
    Target(POOL, "DeepSeekV4IndexerPool.get_index_k_with_scale_buffer", ("self", "layer_id")),
    Target(
        POOL, "DeepSeekV4TokenToKVPool.pd_kv_layout", ("self",),
        lambda original, _mod: _runtime().pd_layout_fn(original),
    ),
    Target(
        CONFIGURATOR, "get_dsv4_indexer_bytes_per_token", ("index_head_dim", "use_fp4_indexer"),
        lambda original, _mod: _runtime().bytes_per_token_fn(original),
    ),
    Target(
        COMPRESSOR, "compress_norm_rope_store",
        ("kv", "plan", "norm_weight", "norm_eps", "freq_cis", "out_loc", "kvcache", "page_size", "use_fp4",
         "bf16_store", "kvcache_scale", "rope_cache", "fp4_k_write_metadata", "layout", "fp8_2buff",
         "kvcache_rope"),
        lambda original, _mod: _runtime().compress_store_fn(original),
        called_from=("CompressorBackendMixin._forward_compress_all_in_one",),
    ),
    Target(
        INDEXER, "C4IndexerBackendMixin.forward_c4_indexer",
        ("self", "x", "q_lora", "c4_indexer", "forward_batch", "alt_streams", "enable_multi_stream",
         "q_lora_ready", "skip_compressor", "q_lora_quant"),
        lambda _original, mod: importlib.import_module("launchers.sglang.bf16_indexer").make_forward_c4_indexer(mod),
    ),
    # relied on by the replacement forward_c4_indexer, not replaced
    Target(INDEXER, "C4IndexerBackendMixin._forward_prepare_normal",
           ("self", "x", "q_lora", "c4_indexer", "positions", "forward_batch", "skip_compressor", "q_lora_quant")),
    Target(INDEXER, "C4IndexerBackendMixin._forward_prepare_multi_stream",
           ("self", "x", "q_lora", "c4_indexer", "positions", "forward_batch", "alt_streams", "q_lora_ready")),
    Target(INDEXER, "topk_transform_pytorch_vectorized",
           ("scores", "seq_lens", "page_tables", "out_page_indices", "page_size", "out_raw_indices")),
    Target(INDEXER, "topk_transform_flashinfer_fused",
           ("scores", "seq_lens", "page_tables", "out_page_indices", "page_size", "out_raw_indices")),
    Target(INDEXER, "topk_transform_flashinfer_unfused",
           ("scores", "seq_lens", "page_tables", "out_page_indices", "page_size", "out_raw_indices")),
    Target(INDEXER, "topk_transform_paged",
           ("scores", "seq_lens", "page_tables", "out_page_indices", "page_size", "out_raw_indices")),
    Target(INDEXER, "topk_transform_paged_v2",
           ("scores", "seq_lens", "page_tables", "out_page_indices", "page_size", "metadata", "out_raw_indices")),
    Target(INDEXER, "plan_topk_v2", ("seq_lens", "static_threshold", "out")),
    Target(INDEXER, "iter_row_chunks", ("num_rows", "rows_per_chunk")),
    Target(INDEXER, "get_global_indexer_capturer", ()),
)  # fmt: skip


def activation_env(env: Mapping[str, str]) -> dict[str, str]:
    """The variables a server needs for bf16 index keys, given its environment: the patch directory first
    on PYTHONPATH and SGLANG_DSV4_BF16_INDEX_K=1. Pure; the launcher merges the result."""
    path = env.get("PYTHONPATH", "")
    return {"PYTHONPATH": os.pathsep.join(p for p in (str(PATCH_DIR), path) if p), ENV_VAR: "1"}


def refusal(what: str) -> PatchRefused:
    return PatchRefused(
        f"recall-eval bf16 index-K patch refused: {what}; use SGLang {SUPPORTED_SGLANG} unmodified, "
        "or index_k_dtype=fp8"
    )


def check_version(version: str) -> None:
    if version != SUPPORTED_SGLANG:
        raise refusal(f"it is written for SGLang {SUPPORTED_SGLANG}, found {version}")


def installed_sglang_version() -> str | None:
    try:
        return importlib.metadata.version("sglang")
    except importlib.metadata.PackageNotFoundError:
        return None


def _resolve(module: ModuleType, path: str) -> tuple[Any, str, Any]:
    """(owner, attribute name, value) of a dotted attribute path; the value as stored (unwrapped)."""
    owner: Any = module
    *parents, name = path.split(".")
    for part in parents:
        owner = getattr(owner, part, None)
        if owner is None:
            raise refusal(f"{module.__name__}.{path} is missing ({part} not found)")
    if name not in vars(owner):
        raise refusal(f"{module.__name__}.{path} is missing")
    return owner, name, vars(owner)[name]


def _original(value: Any) -> Any:
    return getattr(value, MARK, value)


def check_target(target: Target, module: ModuleType) -> None:
    """Raise PatchRefused unless the target exists with the expected parameters and call sites."""
    _owner, _name, value = _resolve(module, target.path)
    value = _original(value)
    if not callable(value):
        raise refusal(f"{target.qualname} is not a function")
    params = tuple(inspect.signature(value).parameters)
    if params != target.params:
        raise refusal(f"{target.qualname} takes ({', '.join(params)}), expected ({', '.join(target.params)})")
    for caller_path in target.called_from:
        caller = _original(_resolve(module, caller_path)[2])
        if target.path not in caller.__code__.co_names:
            raise refusal(f"{module.__name__}.{caller_path} no longer calls {target.path}")


def patch_module(module: ModuleType) -> None:
    """Check, then replace, every target in this module (idempotent)."""
    targets = [t for t in TARGETS if t.module == module.__name__]
    for target in targets:
        check_target(target, module)
    for target in targets:
        if target.make is None:
            continue
        owner, name, value = _resolve(module, target.path)
        if hasattr(value, MARK):
            continue
        replacement = target.make(value, module)
        setattr(replacement, MARK, value)
        setattr(owner, name, replacement)


def unpatch_module(module: ModuleType) -> None:
    """Put back what patch_module replaced (tests use this to leave SGLang as they found it)."""
    for target in TARGETS:
        if target.module == module.__name__ and target.make is not None:
            owner, name, value = _resolve(module, target.path)
            if hasattr(value, MARK):
                setattr(owner, name, getattr(value, MARK))


def target_modules() -> tuple[str, ...]:
    return tuple(dict.fromkeys(t.module for t in TARGETS))


def apply() -> list[ModuleType]:
    """Import every target module now and patch it. Returns the modules (for unpatch_module)."""
    import sglang

    check_version(sglang.__version__)
    modules = [importlib.import_module(name) for name in target_modules()]
    for module in modules:
        patch_module(module)
    return modules


class _PatchingLoader(importlib.abc.Loader):
    def __init__(self, inner: importlib.abc.Loader):
        self._inner = inner

    def __getattr__(self, name: str) -> Any:  # get_source, get_filename, ... for inspect and tracebacks
        return getattr(self._inner, name)

    def create_module(self, spec):  # type: ignore[no-untyped-def]
        return self._inner.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        self._inner.exec_module(module)
        try:
            patch_module(module)
        except PatchRefused as refused:
            announce(str(refused))
            raise


class PatchOnImport(importlib.abc.MetaPathFinder):
    """Patches the target modules as SGLang imports them, so activation costs nothing up front."""

    def __init__(self, names: tuple[str, ...]):
        self._names = frozenset(names)

    def find_spec(self, fullname, path, target=None):  # type: ignore[no-untyped-def]
        if fullname not in self._names:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None:
                if spec.loader is not None:
                    spec.loader = _PatchingLoader(spec.loader)
                return spec
        return None


def activate() -> None:
    """Called by sitecustomize in every Python process of a server started with SGLANG_DSV4_BF16_INDEX_K=1."""
    version = installed_sglang_version()
    if version is None:
        return  # not an SGLang process: nothing to patch
    check_version(version)
    if any(isinstance(finder, PatchOnImport) for finder in sys.meta_path):
        return
    already = [sys.modules[name] for name in target_modules() if name in sys.modules]
    for module in already:
        patch_module(module)
    sys.meta_path.insert(0, PatchOnImport(target_modules()))
    announce(f"bf16 index keys active: SGLang {version} DeepSeek-V4 indexer K in bf16 (256 bytes/token)")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Check that the bf16 index-K patch applies to this SGLang.")
    parser.add_argument("--check", action="store_true", help="import SGLang's target modules and check them")
    args = parser.parse_args(argv)
    if not args.check:
        parser.print_help()
        return 2
    try:
        modules = apply()
    except PatchRefused as refused:
        print(refused, file=sys.stderr)
        return 2
    for module in modules:
        unpatch_module(module)
    print(f"bf16 index-K patch applies to SGLang {SUPPORTED_SGLANG}: {len(TARGETS)} targets checked")
    return 0


if __name__ == "__main__":
    sys.exit(main())
