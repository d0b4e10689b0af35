"""Start the real reference server (`python -m launchers.reference.server`) for end-to-end tests."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx

from tests.e2e.cli import REPO, cli_env

READY_TIMEOUT_S = 180.0


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class ReferenceServer:
    """One reference server process in its own process group, stopped by group."""

    def __init__(self, log_path: Path, *extra_args: str):
        self.port = free_port()
        self.base_url = f"http://127.0.0.1:{self.port}"
        argv = [sys.executable, "-m", "launchers.reference.server", "--port", str(self.port), *extra_args]
        self.log = open(log_path, "w")  # noqa: SIM115 - closed in stop()
        self.process = subprocess.Popen(
            argv, stdout=self.log, stderr=subprocess.STDOUT, env=cli_env(), cwd=REPO, start_new_session=True
        )
        self._wait_ready(log_path)

    def _wait_ready(self, log_path: Path) -> None:
        deadline = time.monotonic() + READY_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(
                    f"reference server exited {self.process.returncode}: {log_path.read_text()[-2000:]}"
                )
            try:
                if httpx.get(f"{self.base_url}/health_generate", timeout=5).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.2)
        self.stop()
        raise RuntimeError(
            f"reference server not ready in {READY_TIMEOUT_S:.0f}s: {log_path.read_text()[-2000:]}"
        )

    def stop(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()
        self.log.close()
