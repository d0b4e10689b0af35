"""The Ray tests' cluster: one two-raylet cluster on 127.0.0.1 for the whole session
(tests/ray/loopback_cluster.py), started in a session of its own and stopped by its process group."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass

import psutil
import pytest

from tests.e2e.cli import REPO, cli_env

HEAD_GPUS = NODE_GPUS = 2
START_TIMEOUT_S = 120.0


@dataclass(frozen=True)
class LoopbackCluster:
    address: str
    process: subprocess.Popen[str]

    def processes(self) -> list[psutil.Process]:
        """The cluster's processes: its holder and everything below it (GCS, raylets, workers)."""
        holder = psutil.Process(self.process.pid)
        return [holder, *holder.children(recursive=True)]


@pytest.fixture(scope="session")
def ray_cluster() -> Iterator[LoopbackCluster]:
    # the raylets' workers import the checkout (PYTHONPATH), as a node with recall-eval installed does
    process = subprocess.Popen(
        [sys.executable, "-m", "tests.ray.loopback_cluster", str(HEAD_GPUS), str(NODE_GPUS)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        cwd=REPO,
        env=cli_env(),
        start_new_session=True,
    )
    assert process.stdout is not None and process.stdin is not None
    started = time.monotonic()
    line = process.stdout.readline()
    assert line.startswith("ADDRESS "), f"the loopback cluster did not start: {line!r}"
    assert time.monotonic() - started < START_TIMEOUT_S
    try:
        yield LoopbackCluster(line.split()[1], process)
    finally:
        process.stdin.close()  # the holder shuts the cluster down
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            pass
        try:
            os.killpg(process.pid, signal.SIGKILL)  # whatever of its group is left
        except ProcessLookupError:
            pass
        process.wait()
