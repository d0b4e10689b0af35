"""Start a third-party or test HTTP server process in its own process group and wait for /v1/models."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

import httpx

from tests.e2e.cli import REPO, cli_env
from tests.e2e.reference_server import ServerProcess, free_port

SCRIPTED_SERVER = Path(__file__).with_name("scripted_server.py")


def start_scripted(answers: Mapping[str, str], folder: Path, name: str = "server") -> ServerProcess:
    """tests/e2e/scripted_server.py answering `answers` (see its docstring for how a prompt finds its
    answer), with its answers file and log written in `folder` as NAME.json and NAME.log."""
    path = folder / f"{name}.json"
    path.write_text(json.dumps(answers))
    port = free_port()
    return start_served(
        [sys.executable, str(SCRIPTED_SERVER), str(port), str(path)], folder / f"{name}.log", port
    )


def start_served(
    argv: Sequence[str],
    log_path: Path,
    port: int,
    headers: Mapping[str, str] | None = None,
    ready_timeout_s: float = 120.0,
    ready_path: str = "/v1/models",
    scheme: str = "http",
) -> ServerProcess:
    """Run argv (which must listen on 127.0.0.1:port) and return once GET ready_path answers 200
    (https: without checking the certificate, which the test under way is about)."""
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            list(argv), cwd=REPO, stdout=log, stderr=subprocess.STDOUT, start_new_session=True, env=cli_env()
        )
    server = ServerProcess(process, f"{scheme}://127.0.0.1:{port}", log_path)
    started = time.perf_counter()
    try:
        with httpx.Client(timeout=5.0, headers=dict(headers or {}), verify=False, trust_env=False) as client:
            while time.perf_counter() - started < ready_timeout_s:
                if process.poll() is not None:
                    raise AssertionError(
                        f"{argv[0]} exited with {process.returncode}:\n{server.log()[-3000:]}"
                    )
                try:
                    if client.get(f"{server.base_url}{ready_path}").status_code == 200:
                        server.ready_s = time.perf_counter() - started
                        return server
                except httpx.TransportError:
                    pass
                time.sleep(0.1)
        raise AssertionError(f"{argv[0]} not ready within {ready_timeout_s} s:\n{server.log()[-3000:]}")
    except BaseException:
        server.stop()
        raise


__all__ = ["free_port", "start_scripted", "start_served"]
