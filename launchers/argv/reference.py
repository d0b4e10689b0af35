"""argv of the embedded reference engine (python -m launchers.reference.server; flags as SGLang names them)."""

from __future__ import annotations

import dataclasses
import json
import os
import sys
from pathlib import Path

from launchers.argv.spec import LaunchSpec
from launchers.reference.faults import check as check_fault
from recall_eval.errors import BadInput
from recall_eval.types import Profile

REFERENCE_MODULE = "launchers.reference.server"
# So that `-m launchers.reference.server` imports from any working directory, installed or not.
PROJECT_ROOT = Path(__file__).resolve().parents[2]


def _refuse_unsupported(profile: Profile) -> None:
    """What the reference engine cannot do beyond its kind's fields and precisions (launchers/kinds)."""
    where = f"profile {profile.name!r} (engine reference)"
    try:
        check_fault(profile.fault, profile.index_k_dtype)
    except ValueError as err:
        raise BadInput(f"{where}: {err}") from err
    if profile.tp != 1:
        raise BadInput(f"{where}: the reference engine runs in one process; tp must be 1, got {profile.tp}")
    if {part.role for part in profile.pd} - {"worker", "router"}:
        raise BadInput(
            f"{where}: PD disaggregation needs engine 'sglang' (the reference engine takes workers)"
        )


def _env(profile: Profile) -> dict[str, str]:
    own = profile.env.get("PYTHONPATH")
    pythonpath = os.pathsep.join([own, str(PROJECT_ROOT)]) if own else str(PROJECT_ROOT)
    return {**profile.env, "PYTHONPATH": pythonpath}


def reference_worker_specs(profile: Profile) -> list[LaunchSpec]:
    """The data-parallel workers of a reference profile with worker parts (the router is router.py's)."""
    workers = [part for part in profile.pd if part.role == "worker"]
    specs = []
    for index, part in enumerate(workers, start=1):
        own = profile.model_copy(
            update={
                "port": part.port,
                "pd": (),
                "extra_args": (*profile.extra_args, *part.extra_args),
                "env": {**profile.env, **part.env},
            }
        )
        spec = reference_spec(own)
        name = "worker" if len(workers) == 1 else f"worker-{index}"
        specs.append(dataclasses.replace(spec, role="worker", name=name, is_endpoint=False))
    return specs


def reference_spec(profile: Profile) -> LaunchSpec:
    _refuse_unsupported(profile)
    argv = [sys.executable, "-m", REFERENCE_MODULE, "--host", profile.host, "--port", str(profile.port)]
    if profile.model_path:
        argv += ["--model-path", profile.model_path]
    if profile.served_model_name:
        argv += ["--served-model-name", profile.served_model_name]
    if profile.context_length is not None:
        argv += ["--context-length", str(profile.context_length)]
    if profile.max_total_tokens is not None:
        argv += ["--max-total-tokens", str(profile.max_total_tokens)]
    if profile.mem_fraction_static is not None:
        argv += ["--mem-fraction-static", str(profile.mem_fraction_static)]
    if profile.index_topk is not None:
        argv += ["--json-model-override-args", json.dumps({"index_topk": profile.index_topk})]
    if profile.enable_return_indexer_topk:
        argv.append("--enable-return-indexer-topk")
    argv += ["--index-k-dtype", profile.index_k_dtype]
    if profile.memory_limit_gb is not None:
        argv += ["--memory-limit-gb", str(profile.memory_limit_gb)]
    if profile.fault is not None:
        argv += ["--fault", profile.fault]
    argv += list(profile.extra_args)
    return LaunchSpec(
        role="main",
        name="main",
        argv=tuple(argv),
        env=_env(profile),
        host=profile.host,
        port=profile.port,
        is_endpoint=True,
    )
