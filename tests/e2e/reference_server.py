"""Start the real reference server (`python -m launchers.reference.server`) in tests.

start_server + wait_ready for tests that look at start-up itself (statuses, time to ready, deaths);
ReferenceServer for tests that only need a ready server.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from launchers.ports import free_port
from tests.e2e.cli import REPO, cli_env

READY_TIMEOUT_S = 180.0


@dataclass
class ServerProcess:
    """One reference server process in its own process group, stopped by group."""

    process: subprocess.Popen[bytes]
    base_url: str
    log_path: Path
    ready_s: float | None = None
    statuses: list[int] = field(default_factory=list)  # /health_generate answers seen while starting

    @property
    def port(self) -> int:
        return int(self.base_url.rsplit(":", 1)[1])

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def stop(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(timeout=15)


def start_server(
    log_dir: Path, *flags: str, env: dict[str, str] | None = None, log_path: Path | None = None
) -> ServerProcess:
    """Start the server on a free port, logging to log_path (default: log_dir/server-<port>.log)."""
    port = free_port()
    log_path = log_path or log_dir / f"server-{port}.log"
    argv = [sys.executable, "-m", "launchers.reference.server", "--port", str(port), *flags]
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            argv,
            cwd=REPO,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env={**cli_env(), **(env or {})},
        )
    return ServerProcess(process, f"http://127.0.0.1:{port}", log_path)


def wait_ready(server: ServerProcess, deadline_s: float, started: float) -> float:
    """Poll /health_generate until 200; returns seconds from `started` (a perf_counter time).

    Records in server.statuses every distinct status seen on the way (503 while loading).
    """
    with httpx.Client(timeout=5.0) as client:
        while time.perf_counter() - started < deadline_s:
            if server.process.poll() is not None:
                raise AssertionError(
                    f"server exited with {server.process.returncode}:\n{server.log()[-3000:]}"
                )
            try:
                status = client.get(f"{server.base_url}/health_generate").status_code
            except httpx.TransportError:
                status = None
            if status is not None and status not in server.statuses:
                server.statuses.append(status)
            if status == 200:
                return time.perf_counter() - started
            time.sleep(0.05)
    raise AssertionError(f"not ready within {deadline_s} s:\n{server.log()[-3000:]}")


class ReferenceServer:
    """A ready reference server, logging to log_path; stop() stops its process group."""

    def __init__(self, log_path: Path, *extra_args: str):
        self.server = start_server(log_path.parent, *extra_args, log_path=log_path)
        self.port = self.server.port
        self.base_url = self.server.base_url
        try:
            self.server.ready_s = wait_ready(self.server, READY_TIMEOUT_S, time.perf_counter())
        except BaseException:
            self.server.stop()
            raise

    def stop(self) -> None:
        self.server.stop()
