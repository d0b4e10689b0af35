"""What one server process needs to start: argv, environment, where it listens."""

from __future__ import annotations

import os
import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

LaunchRole = Literal["main", "prefill", "decode", "router"]
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
        """The command as a shell would show it: env assignments, then the argv (shlex-quoted)."""
        assignments = []
        for key, value in sorted(self.env.items()):
            if key in PATH_LIST_VARS:  # show that the caller's value is kept after ours
                assignments.append(f"{key}={shlex.quote(value)}${{{key}:+:${key}}}")
            else:
                assignments.append(f"{key}={shlex.quote(value)}")
        return " ".join([*assignments, shlex.join(self.argv)])

    def short_line(self) -> str:
        """The argv for a one-line banner: the program by its name, no env (command_line has both)."""
        program = os.path.basename(self.argv[0]) if self.argv else ""
        return shlex.join([program, *self.argv[1:]])

    def merged_env(self, base: Mapping[str, str] | None = None) -> dict[str, str]:
        """The process environment: base (default os.environ) with env applied; path lists prepended."""
        merged = dict(os.environ if base is None else base)
        for key, value in self.env.items():
            if key in PATH_LIST_VARS and merged.get(key):
                merged[key] = os.pathsep.join([value, merged[key]])
            else:
                merged[key] = value
        return merged
