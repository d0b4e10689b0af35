"""Which index-key precision a server really gets, from its setting and its environment."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from recall_eval.errors import BadInput
from recall_eval.types import IndexKDtype

BF16_INDEX_K_ENV = "SGLANG_DSV4_BF16_INDEX_K"  # the bundled bf16 index-K patch's switch (=1: bf16)
# The bundled patch (a sitecustomize plus its kernels) lives here; the kernels work owns its content.
BF16_PATCH_DIR = Path(__file__).resolve().parent.parent / "sglang" / "patch"


def effective_index_k_dtype(dtype: IndexKDtype, env: Mapping[str, str], where: str) -> IndexKDtype:
    """The setting, checked against an explicit env switch that would contradict it."""
    switch = env.get(BF16_INDEX_K_ENV)
    if switch is None:
        return dtype
    if switch.strip() == "1" and dtype != "bf16":
        raise BadInput(
            f"{where}: env {BF16_INDEX_K_ENV}=1 selects bf16 index keys but index_k_dtype is {dtype}; "
            f'set index_k_dtype = "bf16" and drop the env entry'
        )
    if switch.strip() != "1" and dtype == "bf16":
        raise BadInput(
            f"{where}: index_k_dtype bf16 needs {BF16_INDEX_K_ENV}=1 but the env sets it to {switch!r}; drop the env entry"
        )
    return dtype
