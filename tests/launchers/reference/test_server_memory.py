"""The memory cap kills the reference server for real, as an SGLang GPU server dies of OOM.

Each test starts its own server: a death ends the process, so nothing is shared.
"""

from __future__ import annotations

import time

import httpx
import pytest

from tests.e2e.reference_server import start_server, wait_ready
from tests.launchers.reference.test_server_http import words

pytestmark = pytest.mark.slow

POOL = 32768
HEADROOM_GIB = 64 / 1024  # what is left for a request's activations above the ready server's usage
LONG_PROMPT = 24000


def in_use_after_ready(tmp_path, *flags: str) -> int:  # noqa: ANN001
    """Memory (VmData) of a ready, warmed-up server under a generous cap, then the server is stopped."""
    started = time.perf_counter()
    server = start_server(tmp_path, "--memory-limit-gb", "8", *flags)
    try:
        wait_ready(server, 60.0, started)
        with httpx.Client(base_url=server.base_url, timeout=60) as client:
            client.post("/generate", json={"text": words(50), "sampling_params": {"max_new_tokens": 2}})
            return client.get("/server_info").json()["internal_states"][0]["memory_in_use_bytes"]
    finally:
        server.stop()


def test_prefill_beyond_the_cap_dies_with_sglang_line(tmp_path) -> None:  # noqa: ANN001
    flags = ("--max-total-tokens", str(POOL), "--context-length", str(POOL))
    limit_gib = in_use_after_ready(tmp_path, *flags) / 2**30 + HEADROOM_GIB
    started = time.perf_counter()
    server = start_server(tmp_path, "--memory-limit-gb", f"{limit_gib:.4f}", *flags)
    try:
        wait_ready(server, 60.0, started)
        with httpx.Client(base_url=server.base_url, timeout=300) as client:
            short = client.post(
                "/generate", json={"text": words(50), "sampling_params": {"max_new_tokens": 2}}
            )
            assert short.status_code == 200, short.text  # a short prompt fits under the cap
            tokens = client.post("/v1/tokenize", json={"prompt": words(LONG_PROMPT, seed=1)}).json()["tokens"]
            body = {"input_ids": tokens[:LONG_PROMPT], "sampling_params": {"max_new_tokens": 2}}
            with pytest.raises(httpx.TransportError):
                client.post("/generate", json=body)
        assert server.process.wait(timeout=30) != 0
        log = server.log()
        assert "Prefill out of memory. Try to lower your batch size.\n" in log
        assert f"Try to allocate {LONG_PROMPT} tokens." in log
        assert "Scheduler hit an exception" in log and "can't allocate memory" in log
    finally:
        server.stop()


def test_pool_that_does_not_fit_dies_at_startup_like_sglang(tmp_path) -> None:  # noqa: ANN001
    server = start_server(
        tmp_path, "--memory-limit-gb", "1", "--max-total-tokens", "50000000", "--mem-fraction-static", "0.9"
    )
    try:
        code = server.process.wait(timeout=60)
        log = server.log()
        assert code != 0, log[-2000:]
        assert "Not enough memory. Please try to increase --mem-fraction-static. Current value: " in log
        assert "mem_fraction_static=0.9" in log and "Received sigquit from a child process" in log
    finally:
        server.stop()


def test_cap_below_current_usage_is_a_clear_error(tmp_path) -> None:  # noqa: ANN001
    server = start_server(tmp_path, "--memory-limit-gb", "0.01")
    try:
        assert server.process.wait(timeout=60) == 2
        assert "is below the" in server.log() and "raise the limit" in server.log()
    finally:
        server.stop()
