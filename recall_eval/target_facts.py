"""What a run knows about its server's settings: only what it launched, learned or was told.

A report for a tool whose job is fp8 against bf16 must never state a precision it did not learn. A
launched server runs the profile's settings; a running server (`--base-url`) states its own in
/server_info where it does (the allow-listed fields in run.json: `index_k_dtype`, `index_topk`, SGLang's
`json_model_override_args` carrying `index_topk`, `enable_deepseek_v4_fp4_indexer`), and everything it did
not state is `unknown`, never a profile default. The reports, `runs`, `export` and the compare verdict
read these facts from here, so they agree.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal
from urllib.parse import urlsplit

from recall_eval.engines import launched as engine_launched
from recall_eval.types import Run

UNKNOWN = "unknown"
Source = Literal["launched", "server", "unknown"]


@dataclass(frozen=True)
class TargetFacts:
    """Settings of a run's server; None where the run neither set nor learned them."""

    index_k_dtype: str | None
    index_k_dtype_source: Source
    index_topk: int | None  # None: unknown (a launched server without one runs its model's default)
    index_topk_source: Source
    port: int | None

    def shown(self, name: str) -> str:
        """A fact as reports and the console print it: its value, or `unknown`."""
        value = getattr(self, name)
        return UNKNOWN if value is None else str(value)


def find_key(tree: Any, keys: tuple[str, ...]) -> Any:
    """First non-None value under any of keys, searching nested dicts and lists (a launched server's
    info nests /server_info's answer; SGLang nests per-scheduler states in a list)."""
    if isinstance(tree, Mapping):
        for key in keys:
            if tree.get(key) is not None:
                return tree[key]
        tree = list(tree.values())
    if isinstance(tree, list | tuple):
        for value in tree:
            found = find_key(value, keys) if isinstance(value, Mapping | list | tuple) else None
            if found is not None:
                return found
    return None


def learned_index_k_dtype(info: Mapping[str, Any]) -> str | None:
    """The index-key precision a server states about itself, or None."""
    dtype = find_key(info, ("index_k_dtype",))
    if isinstance(dtype, str) and dtype in ("fp8", "bf16", "fp4"):
        return dtype
    if find_key(info, ("enable_deepseek_v4_fp4_indexer",)) is True:
        return "fp4"
    return None


def learned_index_topk(info: Mapping[str, Any]) -> int | None:
    """index_topk as a server states it: its own field, else SGLang's json_model_override_args."""
    topk = find_key(info, ("index_topk",))
    if isinstance(topk, int) and not isinstance(topk, bool) and topk > 0:
        return topk
    overrides = find_key(info, ("json_model_override_args",))
    if isinstance(overrides, str) and overrides.strip():
        try:
            overrides = json.loads(overrides)
        except ValueError:
            return None
    if isinstance(overrides, Mapping):
        topk = overrides.get("index_topk")
        if isinstance(topk, int) and not isinstance(topk, bool) and topk > 0:
            return topk
    return None


def _url_port(url: str | None) -> int | None:
    if not url:
        return None
    try:
        return urlsplit(url).port
    except ValueError:
        return None


def target_facts(run: Run) -> TargetFacts:
    """The settings the run launched, else learned from its server, else unknown (see the docstring)."""
    profile, info = run.profile, run.server_info
    dtype, topk = learned_index_k_dtype(info), learned_index_topk(info)
    launched = engine_launched(profile)
    if launched and profile is not None:
        port = profile.port or _int(find_key(info, ("port",))) or _url_port(find_key(info, ("base_url",)))
        return TargetFacts(
            index_k_dtype=profile.index_k_dtype,
            index_k_dtype_source="launched",
            index_topk=profile.index_topk or topk,
            index_topk_source="launched" if profile.index_topk else ("server" if topk else "unknown"),
            port=port,
        )
    url = (profile.base_url if profile else None) or find_key(info, ("base_url",))
    return TargetFacts(
        index_k_dtype=dtype,
        index_k_dtype_source="server" if dtype else "unknown",
        index_topk=topk,
        index_topk_source="server" if topk else "unknown",
        port=_url_port(url if isinstance(url, str) else None),
    )


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None
