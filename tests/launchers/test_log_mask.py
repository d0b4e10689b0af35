"""A launched server's output reaches its log masked, and "it answered" marks the right place."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from launchers.log_mask import MaskedLog, launch_secrets
from recall_eval.redact import MASK

KEY = "sk-launch-key-7f3a"


def test_launch_secrets_come_from_secret_flags_and_env():
    argv = ["python", "-m", "sglang", "--api-key", KEY, "--admin-api-key=admin-9c2e", "--port", "30000"]
    assert launch_secrets(argv, {"HF_TOKEN": "hf_abcdef", "PATH": "/usr/bin"}) == sorted(
        [KEY, "admin-9c2e", "hf_abcdef"]
    )


def test_lines_are_masked_and_a_mark_counts_lines_still_in_the_pipe(tmp_path):
    log_path = tmp_path / "server-main.log"
    log_path.write_bytes(b"===== recall-eval: start =====\n")
    read_end, write_end = os.pipe()
    masked = MaskedLog(read_end, log_path, [KEY])
    os.write(write_end, f"server_args=ServerArgs(api_key='{KEY}', port=30000)\n".encode())
    os.write(write_end, b"old line, printed before the answer\n")
    offset = masked.mark_served()  # the server answered: both lines above are older, read or not
    os.write(write_end, b"Prefill out of memory, after the answer\npartial line without newline")
    os.close(write_end)
    masked.wait()
    assert not masked.thread.is_alive()
    text = log_path.read_text()
    assert KEY not in text and f"api_key='{MASK}'" in text
    served = offset if offset is not None else masked.served_offset()
    assert served is not None
    after = log_path.read_bytes()[served:].decode()
    assert after == "Prefill out of memory, after the answer\npartial line without newline"


def test_a_mark_with_nothing_pending_is_the_log_size(tmp_path):
    log_path = tmp_path / "server.log"
    read_end, write_end = os.pipe()
    masked = MaskedLog(read_end, log_path, [])
    os.write(write_end, b"ready\n")
    deadline = time.monotonic() + 5
    while masked.written < 6 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert masked.mark_served() == log_path.stat().st_size == 6
    os.close(write_end)
    masked.wait()


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs Linux's /dev/full")
def test_a_log_that_cannot_be_written_is_said_once_and_the_server_lives_on():
    """A full disk under the log: the copy says so once and keeps draining the pipe, so the server (a
    real process that prints 300 lines) never meets a closed pipe and exits normally."""
    server = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import time\nfor i in range(300):\n    print('line', i, 'x' * 200, flush=True)\n    time.sleep(0.002)",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    assert server.stdout is not None
    pipe = os.dup(server.stdout.fileno())
    server.stdout.close()
    said: list[str] = []
    masked = MaskedLog(pipe, Path("/dev/full"), [], on_error=said.append)
    assert server.wait(timeout=60) == 0  # not killed by SIGPIPE, no BrokenPipeError
    masked.wait()
    assert not masked.thread.is_alive()
    assert len(said) == 1 and "cannot write the server's log /dev/full" in said[0]
    assert "No space left" in said[0]
