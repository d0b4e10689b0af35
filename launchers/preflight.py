"""Checks before a profile's servers start, each failure one line with its fix.

A launch that cannot work should fail in a second, not after minutes of loading: the engine's module
importable by the Python that will run it (with the server's own environment), the SGLang version the
bf16 index-K patch is written for, enough visible GPUs for the tensor-parallel size, the ports free,
a local model path present.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path

from launchers.argv import LaunchSpec
from launchers.kinds import build_command, kind_of
from launchers.ports import busy_ports
from launchers.sglang.bf16_index_k import SUPPORTED_SGLANG
from recall_eval.errors import UserError
from recall_eval.types import Profile

IMPORT_TIMEOUT_S = 120.0  # importing sglang.launch_server pulls in torch and CUDA libraries
_PROBE = """
import importlib, importlib.metadata, importlib.util, json, sys
module, full = sys.argv[1], sys.argv[2] == "1"
out = {"error": None, "sglang": None}
try:
    if full:
        importlib.import_module(module)
    elif importlib.util.find_spec(module.split(".")[0]) is None:  # runs no package code
        raise ModuleNotFoundError(f"No module named {module.split('.')[0]!r}")
except BaseException as err:
    out["error"] = f"{type(err).__name__}: {err}".splitlines()[0][:200]
try:
    out["sglang"] = importlib.metadata.version("sglang")
except importlib.metadata.PackageNotFoundError:
    pass
print(json.dumps(out))
"""


class PreflightFailed(UserError):
    """One or more checks failed; str() is one line per failure, each with its fix."""

    def __init__(self, profile: str, failures: Sequence[str]):
        lines = "\n".join(f"  - {failure}" for failure in failures)
        super().__init__(f"profile {profile!r} cannot be launched here (nothing was started):\n{lines}")
        self.failures = list(failures)


def _module(spec: LaunchSpec) -> str | None:
    argv = spec.argv
    return argv[2] if len(argv) > 2 and argv[1] == "-m" else None


def _probe(spec: LaunchSpec, module: str, full_import: bool) -> dict[str, str | None]:
    try:
        done = subprocess.run(
            [spec.argv[0], "-c", _PROBE, module, "1" if full_import else "0"],
            env=spec.merged_env(),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=IMPORT_TIMEOUT_S,
        )
    except FileNotFoundError:
        return {"error": f"{spec.argv[0]} not found", "sglang": None}
    except subprocess.TimeoutExpired:
        return {"error": f"importing {module} took over {IMPORT_TIMEOUT_S:.0f} s", "sglang": None}
    try:
        return json.loads(done.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return {
            "error": (done.stderr.strip().splitlines() or ["the interpreter failed"])[-1][:200],
            "sglang": None,
        }


def engine_failures(profile: Profile, specs: Sequence[LaunchSpec], full_import: bool = True) -> list[str]:
    """The engine (and router) modules importable by the server's Python; the bf16 patch's SGLang.
    full_import: import SGLang's modules for real (seconds: torch, CUDA libraries) rather than only
    find them; our reference engine is only ever found (importing it costs torch's start-up)."""
    failures = []
    seen: set[tuple[str, str, str]] = set()
    for spec in specs:
        module = _module(spec)
        key = (spec.argv[0], module or "", spec.env.get("PYTHONPATH", ""))
        if module is None or key in seen:
            continue
        seen.add(key)
        found = _probe(spec, module, full_import=full_import and kind_of(profile).import_to_check)
        if found["error"]:
            package = module.split(".")[0]
            fix = {
                "sglang": "pip install -e '.[sglang]' on this machine (sglang==0.5.23 with its CUDA stack)",
                "sglang_router": "pip install sglang-router==0.3.2",
            }.get(package, "reinstall recall-eval: pip install -e .")
            failures.append(f"{spec.name}: {spec.argv[0]} cannot import {module} ({found['error']}); {fix}")
            continue
        bf16 = (spec.env.get("SGLANG_DSV4_BF16_INDEX_K") == "1") and module.startswith("sglang.")
        if bf16 and found["sglang"] != SUPPORTED_SGLANG:
            failures.append(
                f"{spec.name}: the bf16 index-K patch is written for SGLang {SUPPORTED_SGLANG}, found "
                f"{found['sglang'] or 'none'}; pip install sglang=={SUPPORTED_SGLANG}, or use index_k_dtype=fp8"
            )
    return failures


def visible_gpus(env: dict[str, str] | None = None) -> int:
    """GPUs a server would see: nvidia-smi's list, narrowed by CUDA_VISIBLE_DEVICES when set."""
    env = dict(os.environ) if env is None else env
    count = 0
    smi = shutil.which("nvidia-smi")
    if smi is not None:
        try:
            listing = subprocess.run([smi, "-L"], capture_output=True, text=True, timeout=30).stdout
            count = sum(1 for line in listing.splitlines() if line.startswith("GPU "))
        except (OSError, subprocess.TimeoutExpired):
            count = 0
    visible = env.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        chosen = [item for item in visible.split(",") if item.strip() and item.strip() != "-1"]
        count = min(count, len(chosen))
    return count


def gpu_failures(profile: Profile, specs: Sequence[LaunchSpec]) -> list[str]:
    needed = kind_of(profile).gpus_needed(profile)
    if needed == 0:
        return []
    have = visible_gpus(specs[0].merged_env())
    if have >= needed:
        return []
    return [
        f"tp {profile.tp} needs {needed} GPU{'s' if needed > 1 else ''}, {have} visible (nvidia-smi -L, "
        "CUDA_VISIBLE_DEVICES); run on a machine with enough GPUs or lower tp (--tp N)"
    ]


def port_failures(specs: Sequence[LaunchSpec]) -> list[str]:
    failures = []
    for spec in specs:
        for port in busy_ports(spec.host, [spec.port, *spec.extra_ports]):
            failures.append(
                f"{spec.name}: port {port} on {spec.host} is already in use; stop that server or pick another "
                "port (--port N, or the profile's port)"
            )
    return failures


def model_path_failures(profile: Profile) -> list[str]:
    """A path that names a local directory must exist; a hub id (org/name) is fetched by the engine."""
    path = profile.model_path
    if not path:
        return []
    local = path.startswith(("/", "./", "../", "~")) or not re.fullmatch(r"[\w.-]+/[\w.-]+", path)
    if local and not Path(path).expanduser().exists():
        return [f"model path {path} does not exist; fix the profile's model_path or pass --model-path DIR"]
    return []


def preflight(profile: Profile, specs: Sequence[LaunchSpec] | None = None) -> list[str]:
    """Every failed check, one line each with its fix; empty when the launch can go ahead."""
    kind = kind_of(profile)
    if not kind.facts.launched:
        return []
    specs = list(specs) if specs is not None else build_command(profile)
    failures = [*model_path_failures(profile), *port_failures(specs), *gpu_failures(profile, specs)]
    # the real import takes seconds: only worth it when nothing else already stops the launch
    failures += engine_failures(profile, specs, full_import=not failures)
    return [*failures, *kind.preflight(profile, specs, full=not failures)]


def require_preflight(profile: Profile, specs: Sequence[LaunchSpec] | None = None) -> None:
    failures = preflight(profile, specs)
    if failures:
        raise PreflightFailed(profile.name, failures)
