"""What one server process needs to start: argv, environment, where it listens."""

from __future__ import annotations

import dataclasses
import os
import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from recall_eval.redact import MASK, Redactor, is_secret_name

LaunchRole = Literal["main", "prefill", "decode", "router", "worker"]
PATH_LIST_VARS = frozenset({"PYTHONPATH"})  # prepended to the caller's value, never replacing it


@dataclass(frozen=True)
class LaunchSpec:
    """One process of a deployment. Pure data: building it starts nothing."""

    role: LaunchRole
    name: (
        str  # unique within a deployment ("main", "prefill", "decode", "router", "prefill-2"): names the log
    )
    argv: tuple[str, ...]
    env: dict[str, str] = field(
        default_factory=dict
    )  # set on top of the caller's environment (see merged_env)
    host: str = "127.0.0.1"
    port: int = 30000
    extra_ports: tuple[int, ...] = ()  # other ports it binds (a prefill server's bootstrap port)
    is_endpoint: bool = False  # the process clients talk to (the server, or the PD router)

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    @property
    def log_name(self) -> str:
        return f"server-{self.name}.log"

    def command_line(self) -> str:
        """The command as a shell would show it: env assignments, then the argv (shlex-quoted).
        Secret-looking values (an --api-key, a *_TOKEN variable) are masked: this line is printed
        and written to the server log."""
        redactor = Redactor()
        assignments = []
        for key, value in sorted(self.env.items()):
            if is_secret_name(key):
                assignments.append(f"{key}={MASK}")
            elif key in PATH_LIST_VARS:  # show that the caller's value is kept after ours
                assignments.append(f"{key}={shlex.quote(value)}${{{key}:+:${key}}}")
            else:
                assignments.append(f"{key}={shlex.quote(value)}")
        return " ".join([*assignments, shlex.join(redactor.argv(self.argv))])

    def as_rank(self, node_rank: int, flags: list[str]) -> LaunchSpec:
        """This process as one node's rank of a multi-node server: rank 0 is the endpoint ("main"), the
        others only join the group ("rankN" workers); `flags` are the engine's own multi-node flags."""
        return dataclasses.replace(
            self,
            name="main" if node_rank == 0 else f"rank{node_rank}",
            role="main" if node_rank == 0 else "worker",
            argv=(*self.argv, *flags),
            is_endpoint=node_rank == 0,
        )

    def short_line(self) -> str:
        """The argv for a one-line banner: the program by its name, no env (command_line has both);
        secret-looking values masked like command_line's."""
        program = os.path.basename(self.argv[0]) if self.argv else ""
        return shlex.join([program, *Redactor().argv(self.argv[1:])])

    def merged_env(self, base: Mapping[str, str] | None = None) -> dict[str, str]:
        """The process environment: base (default os.environ) with env applied; path lists prepended."""
        merged = dict(os.environ if base is None else base)
        for key, value in self.env.items():
            if key in PATH_LIST_VARS and merged.get(key):
                merged[key] = os.pathsep.join([value, merged[key]])
            else:
                merged[key] = value
        return merged
