"""argv and env of SGLang 0.5.23 servers (python -m sglang.launch_server), single or PD-disaggregated.

Flag names are SGLang 0.5.23's own (0.5.23 renamed the nsa flags to dsa); tests parse every argv
built here with SGLang's prepare_server_args.
"""

from __future__ import annotations

import json
import sys
from collections import Counter

from launchers.argv.overrides import model_overrides_in
from launchers.argv.precision import BF16_INDEX_K_ENV, BF16_PATCH_DIR, effective_index_k_dtype
from launchers.argv.spec import LaunchSpec
from recall_eval.errors import BadInput
from recall_eval.types import IndexKDtype, PDPart, Profile

SGLANG_SERVER_MODULE = "sglang.launch_server"
SGLANG_DEFAULT_BOOTSTRAP_PORT = 8998  # ServerArgs.disaggregation_bootstrap_port default in 0.5.23
FP4_INDEXER_FLAG = "--enable-deepseek-v4-fp4-indexer"  # SGLang's experimental FP4 C4 indexer (DeepSeek-V4)
MODEL_OVERRIDES_FLAG = "--json-model-override-args"
ATTN_DP_FLAG = "--attn-dp-size"  # 0.5.23's replacement for --enable-dp-attention --dp-size N
DSA_FUSE_TOPK_ENV = "SGLANG_DSA_FUSE_TOPK"  # 0: DSA top-k returned as token positions (indexer capture)


def _precision_args_env(dtype: IndexKDtype) -> tuple[list[str], dict[str, str]]:
    if dtype == "bf16":
        return [], {BF16_INDEX_K_ENV: "1", "PYTHONPATH": str(BF16_PATCH_DIR)}
    if dtype == "fp4":
        return [FP4_INDEXER_FLAG], {}
    return [], {}


def _server_argv(profile: Profile, port: int, tp: int, extra: list[str]) -> list[str]:
    if not profile.model_path:
        raise BadInput(f"profile {profile.name!r}: engine sglang needs model_path (a model dir or hub id)")
    if profile.memory_limit_gb is not None:
        raise BadInput(
            f"profile {profile.name!r}: memory_limit_gb is a reference-engine setting; use mem_fraction_static"
        )
    argv = [sys.executable, "-m", SGLANG_SERVER_MODULE, "--model-path", profile.model_path]
    argv += ["--host", profile.host, "--port", str(port), "--tp-size", str(tp)]
    optional = {
        "--served-model-name": profile.served_model_name,
        "--mem-fraction-static": profile.mem_fraction_static,
        "--context-length": profile.context_length,
        "--max-total-tokens": profile.max_total_tokens,
        "--page-size": profile.page_size,
        "--dsa-prefill-backend": profile.dsa_prefill_backend,
        "--dsa-decode-backend": profile.dsa_decode_backend,
    }
    for flag, value in optional.items():
        if value is not None:
            argv += [flag, str(value)]
    model_overrides, rest = model_overrides_in(profile, [*profile.extra_args, *extra], MODEL_OVERRIDES_FLAG)
    if model_overrides:
        argv += [MODEL_OVERRIDES_FLAG, json.dumps(model_overrides)]
    if profile.enable_return_indexer_topk:
        argv.append("--enable-return-indexer-topk")
    return argv + _capture_args(profile, tp, rest) + rest


def _capture_env(profile: Profile) -> dict[str, str]:
    """Indexer capture: unfused DSA top-k, so V3.2 selections are token positions, not physical KV slots
    (SGLang 0.5.23 dsa_topk_backend.py:109-110 vs 318-328; no effect on DeepSeek-V4's raw indices)."""
    if not profile.enable_return_indexer_topk or DSA_FUSE_TOPK_ENV in profile.env:
        return {}
    return {DSA_FUSE_TOPK_ENV: "0"}


def _capture_args(profile: Profile, tp: int, args: list[str]) -> list[str]:
    """The capturer needs attention TP size 1 (state_capturer/indexer_topk.py:33): one attention-DP
    group per GPU, unless the profile already chose its attention DP."""
    if not profile.enable_return_indexer_topk or tp <= 1:
        return []
    if any(
        a.startswith(("--attn-dp-size", "--attention-data-parallel-size", "--enable-dp-attention"))
        for a in args
    ):
        return []
    return [ATTN_DP_FLAG, str(tp)]


def single_server_spec(profile: Profile) -> LaunchSpec:
    dtype = effective_index_k_dtype(profile.index_k_dtype, profile.env, f"profile {profile.name!r}")
    precision_args, precision_env = _precision_args_env(dtype)
    argv = _server_argv(profile, profile.port, profile.tp, precision_args)
    return LaunchSpec(
        role="main",
        name="main",
        argv=tuple(argv),
        env={**_capture_env(profile), **profile.env, **precision_env},
        host=profile.host,
        port=profile.port,
        is_endpoint=True,
    )


def _part_names(parts: tuple[PDPart, ...]) -> list[str]:
    totals = Counter(part.role for part in parts)
    seen: Counter[str] = Counter()
    names = []
    for part in parts:
        seen[part.role] += 1
        names.append(part.role if totals[part.role] == 1 else f"{part.role}-{seen[part.role]}")
    return names


def _part_dtype(profile: Profile, part: PDPart, name: str) -> IndexKDtype:
    dtype = part.index_k_dtype or profile.index_k_dtype
    return effective_index_k_dtype(dtype, {**profile.env, **part.env}, f"profile {profile.name!r} ({name})")


def check_pd_precision(profile: Profile) -> IndexKDtype:
    """Prefill and decode must store index keys alike: the KV transfer copies them byte for byte."""
    names = _part_names(profile.pd)
    dtypes = {
        name: _part_dtype(profile, part, name)
        for part, name in zip(profile.pd, names, strict=True)
        if part.role != "router"
    }
    if len(set(dtypes.values())) > 1:
        listed = ", ".join(f"{name} {dtype}" for name, dtype in dtypes.items())
        raise BadInput(
            f"profile {profile.name!r}: prefill and decode disagree on index_k_dtype ({listed}); "
            f"the KV transfer needs one precision: set index_k_dtype once (e.g. --index-k-dtype bf16)"
        )
    return next(iter(dtypes.values()))


def _bootstrap_port(part: PDPart) -> int:
    return part.bootstrap_port if part.bootstrap_port is not None else SGLANG_DEFAULT_BOOTSTRAP_PORT


def pd_server_specs(profile: Profile) -> list[LaunchSpec]:
    """The prefill and decode servers of a PD profile (the router is built by router.py)."""
    dtype = check_pd_precision(profile)
    precision_args, precision_env = _precision_args_env(dtype)
    specs = []
    for part, name in zip(profile.pd, _part_names(profile.pd), strict=True):
        if part.role == "router":
            continue
        mode_args = ["--base-gpu-id", str(part.base_gpu_id)]
        if part.role != "worker":  # a data-parallel worker is a plain server
            mode_args = ["--disaggregation-mode", part.role, *mode_args]
        extra_ports: tuple[int, ...] = ()
        if part.role == "prefill":
            mode_args += ["--disaggregation-bootstrap-port", str(_bootstrap_port(part))]
            extra_ports = (_bootstrap_port(part),)
        argv = _server_argv(
            profile, part.port, part.tp or profile.tp, [*mode_args, *precision_args, *part.extra_args]
        )
        specs.append(
            LaunchSpec(
                role=part.role,
                name=name,
                argv=tuple(argv),
                env={**_capture_env(profile), **profile.env, **part.env, **precision_env},
                host=profile.host,
                port=part.port,
                extra_ports=extra_ports,
            )
        )
    return specs


def prefill_bootstrap(profile: Profile) -> list[tuple[str, int]]:
    """(url, bootstrap port) of every prefill server, for the router."""
    host = f"[{profile.host}]" if ":" in profile.host else profile.host
    return [
        (f"http://{host}:{part.port}", _bootstrap_port(part)) for part in profile.pd if part.role == "prefill"
    ]


def rank_server_spec(profile: Profile, nnodes: int, node_rank: int, dist_init_addr: str) -> LaunchSpec:
    """One node's process of a server spread over `nnodes` nodes (SGLang's multi-node form: the same
    command on every node, told the node count, its rank and rank 0's address for torch.distributed).
    Rank 0 serves HTTP; the other ranks only join the group, so they are no endpoint."""
    spec = single_server_spec(profile)
    flags = ["--nnodes", str(nnodes), "--node-rank", str(node_rank), "--dist-init-addr", dist_init_addr]
    return spec.as_rank(node_rank, flags)
