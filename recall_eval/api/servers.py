"""Servers without a sweep: launch a profile and keep it serving (`serve`), plan its KV memory (`plan`),
list the profiles and the commands they run (`profiles`, `profile_commands`).

The CLI's serve, plan and profiles commands call these; launchers are imported when a function runs,
so importing the library stays cheap.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from recall_eval.api.options import DEFAULT_PROFILE, ClusterOptions, TargetOptions
from recall_eval.errors import BadInput, UserError
from recall_eval.store import runs_home
from recall_eval.types import Profile

if TYPE_CHECKING:
    from launchers.argv import LaunchSpec
    from launchers.lifecycle import LaunchedServer
    from launchers.planner import Plan


def resolve(profile: str | None, target: TargetOptions | None = None) -> Profile:
    """The named profile (default: the reference engine) with the target's overrides applied."""
    from launchers.profiles import resolve_profile

    target = target or TargetOptions()
    return resolve_profile(profile or DEFAULT_PROFILE, target.profile_overrides(), target.profiles_file)


def serve_log_dir(profile_name: str) -> Path:
    """A new folder for one serve's logs: <runs>/serve/<profile>-<UTC time>, with -2, -3, ... when
    another serve took that name in the same second (each serve its own logs and servers.json)."""
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
    parent = runs_home() / "serve"
    parent.mkdir(parents=True, exist_ok=True)
    for number in range(1, 1000):
        path = parent / (f"{profile_name}-{stamp}" + (f"-{number}" if number > 1 else ""))
        try:
            path.mkdir()  # atomic: of two serves started at once, one gets each name
        except FileExistsError:
            continue
        return path
    raise UserError(f"cannot make a log folder under {parent}: 999 serves of {profile_name} this second")


@dataclass(frozen=True)
class Serving:
    """A launched server, ready: its process group and where its logs go."""

    server: LaunchedServer
    log_dir: Path


@contextmanager
def serve(
    profile: str,
    target: TargetOptions | None = None,
    log_dir: Path | None = None,
    echo: Callable[[str], Any] = print,
    cluster: ClusterOptions | None = None,
) -> Iterator[Serving]:
    """Launch `profile` (with the target's overrides) and hold it while inside; every process is stopped
    on leaving, also on errors, Ctrl-C and SIGTERM. `echo` gets the server's output lines and, when the
    start fails, the last log lines that explain it (then ServerStartError, a UserError, is raised).
    cluster.ray: the server is placed on that Ray cluster (its logs still land in the log folder)."""
    from launchers.executors import open_executor
    from launchers.lifecycle import ServerStartError, launch, sigterm_raises_exit

    resolved = resolve(profile, target)
    logs = log_dir or serve_log_dir(resolved.name)
    cluster = cluster or ClusterOptions()
    with sigterm_raises_exit(), open_executor(cluster.ray, cluster.ray_node_gpus) as executor:
        try:
            if cluster.ray:
                server = executor.launch(resolved, logs, echo=echo, preflight=True)
            else:
                server = launch(resolved, logs, echo=echo)
        except ServerStartError as err:
            for line in err.tail:
                echo(f"  {line}")
            raise
        with server:
            yield Serving(server, logs)


def plan(
    profile: str,
    target: TargetOptions | None = None,
    gpu_mem_gib: float | None = None,
    weights_gib: float | None = None,
) -> Plan:
    """Index-key bytes and KV pool capacity of the profile's model at fp8 / fp4 / bf16 index keys.
    The target's context_length is the sequence length to fit (default: the profile's)."""
    from launchers.kinds import kind_of
    from launchers.planner import make_plan

    target = target or TargetOptions()
    overrides = TargetOptions(
        mem_fraction_static=target.mem_fraction_static,
        tp=target.tp,
        model_path=target.model_path,
        profiles_file=target.profiles_file,
    )
    resolved = resolve(profile, overrides)
    refusal = kind_of(resolved).plan_refusal(resolved)
    if refusal is not None:
        raise BadInput(refusal)
    return make_plan(
        resolved,
        context_length=target.context_length,
        gpu_mem_gib=gpu_mem_gib,
        weights_gib=weights_gib,
    )


def profiles(profiles_file: Path | None = None) -> dict[str, Profile]:
    """Every known profile: shipped ones, ./recall-eval.toml, then `profiles_file`."""
    from launchers.profiles import load_profiles

    return load_profiles(profiles_file)


def profile_commands(profile: Profile) -> list[LaunchSpec]:
    """The processes a profile starts (argv, env, URL); BadInput when it cannot be launched."""
    from launchers.kinds import build_command

    return build_command(profile)


def kind_line(profile: Profile) -> str:
    """What the profile's server kind launches and how (launchers/kinds), in one line for `profiles`."""
    from launchers.kinds import kind_of

    kind = kind_of(profile)
    parts = [f"index keys: {', '.join(kind.index_k_dtypes)}"]
    if kind.topk_setting:
        parts.append(f"index_topk via {kind.topk_setting}")
    if kind.length_endpoint:
        parts.append(f"lengths from {kind.length_endpoint}")
    return "; ".join(parts)
