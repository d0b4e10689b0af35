"""End-to-end tests of the reference server: one real server process for the module, spoken to over HTTP.

The engine may still carry random weights, so nothing here depends on what the model answers,
only on the API's shapes, counts and behaviour.
"""

from __future__ import annotations

import asyncio
import base64
import json
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import numpy as np
import pytest

from tests.e2e.reference_server import ServerProcess, start_server, wait_ready

pytestmark = pytest.mark.slow

READY_DEADLINE_S = 120.0  # generous for loaded machines; the benchmark reports the start-to-ready time
CONTEXT = 8192
POOL = 16384
TOPK = 64
WORDS = "alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima mike".split()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    started = time.perf_counter()
    proc = start_server(
        tmp_path_factory.mktemp("reference-server"),
        "--context-length", str(CONTEXT), "--max-total-tokens", str(POOL),
        "--json-model-override-args", json.dumps({"index_topk": TOPK}),
        "--enable-return-indexer-topk", "--served-model-name", "ref-under-test",
    )  # fmt: skip
    try:
        proc.ready_s = wait_ready(proc, READY_DEADLINE_S, started)
        print(f"\nreference server ready (/health_generate 200) {proc.ready_s:.2f} s after start")
        yield proc
    finally:
        proc.stop()


@pytest.fixture(scope="module")
def http(server: ServerProcess) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server.base_url, timeout=120.0) as client:
        yield client


def words(n: int, seed: int = 0) -> str:
    rng = np.random.default_rng(seed)
    return " ".join(WORDS[i] for i in rng.integers(0, len(WORDS), n))


def chat_body(content: str, **extra: object) -> dict[str, object]:
    return {"model": "ref-under-test", "messages": [{"role": "user", "content": content}], **extra}


def sse_events(raw: str) -> list[str]:
    """Payloads of an SSE body, checking SGLang's framing: every event is `data: ...` + blank line."""
    assert raw.endswith("\n\n"), raw[-200:]
    blocks = raw[:-2].split("\n\n")
    assert all(block.startswith("data: ") and "\n" not in block for block in blocks), blocks[:3]
    return [block[len("data: ") :] for block in blocks]


# ----- readiness and info -----


def test_health_generate_is_503_until_ready_then_200(server: ServerProcess, http: httpx.Client) -> None:
    assert server.statuses == [503, 200]
    assert http.get("/health").status_code == 200
    assert http.get("/health_generate").status_code == 200
    log = server.log()
    assert f"max_total_num_tokens={POOL}, chunked_prefill_size=" in log and f"context_len={CONTEXT}" in log
    assert f"index_k_dtype=fp8 (default), index_topk={TOPK}" in log
    assert "The server is fired up and ready to roll!" in log


def test_models_and_server_info(http: httpx.Client) -> None:
    models = http.get("/v1/models").json()
    assert models["object"] == "list"
    (card,) = models["data"]
    assert (
        card["id"] == "ref-under-test" and card["max_model_len"] == CONTEXT and card["owned_by"] == "sglang"
    )
    info = http.get("/server_info").json()
    assert info == {**http.get("/get_server_info").json(), "internal_states": info["internal_states"]}
    assert info["max_total_num_tokens"] == POOL and info["context_length"] == CONTEXT
    assert info["index_k_dtype"] == "fp8" and info["index_topk"] == TOPK
    assert info["kv_bytes_per_token"] > 0 and info["num_indexer_layers"] > 0
    assert info["version"] and info["memory_limit_gb"] is None
    assert "greedy" in info["sampling"]


# ----- tokenize counts equal the chat's prompt tokens -----


def test_tokenize_messages_count_equals_chat_prompt_tokens(http: httpx.Client) -> None:
    content = "Remember the code. " + words(300)
    tok = http.post("/v1/tokenize", json={"messages": [{"role": "user", "content": content}]}).json()
    assert tok["count"] == len(tok["tokens"]) and tok["max_model_len"] == CONTEXT
    chat = http.post("/v1/chat/completions", json=chat_body(content, max_tokens=2)).json()
    assert chat["usage"]["prompt_tokens"] == tok["count"]


def test_tokenize_prompt_count_equals_generate_prompt_tokens(http: httpx.Client) -> None:
    text = words(200, seed=1)
    tok = http.post("/v1/tokenize", json={"prompt": text}).json()
    assert tok["count"] == len(tok["tokens"]) > 0
    out = http.post("/generate", json={"text": text, "sampling_params": {"max_new_tokens": 2}}).json()
    assert out["meta_info"]["prompt_tokens"] == tok["count"]
    by_ids = http.post(
        "/generate", json={"input_ids": tok["tokens"], "sampling_params": {"max_new_tokens": 2}}
    )
    assert by_ids.json()["output_ids"] == out["output_ids"]  # greedy: same prompt, same tokens


def test_ignore_eos_generates_past_the_answer_as_sglang_does(http: httpx.Client) -> None:
    question = "The access code of the Orchid vault is LIMPET-4821-QUARTZ.\n\nWhat is the access code of the Orchid vault?"
    prompt = http.post("/v1/tokenize", json={"messages": [{"role": "user", "content": question}]}).json()[
        "tokens"
    ]
    params = {"max_new_tokens": 40}
    answered = http.post("/generate", json={"input_ids": prompt, "sampling_params": params}).json()
    assert answered["meta_info"]["finish_reason"]["type"] == "stop"
    assert answered["meta_info"]["completion_tokens"] < 40
    past = http.post(
        "/generate", json={"input_ids": prompt, "sampling_params": {**params, "ignore_eos": True}}
    )
    meta = past.json()["meta_info"]
    assert meta["finish_reason"] == {"type": "length", "length": 40} and meta["completion_tokens"] == 40
    assert past.json()["output_ids"][: len(answered["output_ids"])] == answered["output_ids"]
    bad = http.post("/generate", json={"input_ids": prompt, "sampling_params": {"ignore_eos": "yes"}})
    assert bad.status_code == 400 and "ignore_eos" in bad.json()["error"]["message"]


def test_tokenize_needs_exactly_one_input(http: httpx.Client) -> None:
    response = http.post("/v1/tokenize", json={})
    assert response.status_code == 400
    assert "Exactly one of 'prompt' or 'messages' must be provided." in response.json()["message"]


# ----- chat completions -----


def test_stream_and_non_stream_agree(http: httpx.Client) -> None:
    body = chat_body("Write a long story. " + words(100, seed=2), max_tokens=12)
    plain = http.post("/v1/chat/completions", json=body).json()
    assert plain["object"] == "chat.completion"
    (choice,) = plain["choices"]
    assert choice["message"]["role"] == "assistant" and choice["finish_reason"] in ("stop", "length")
    raw = http.post(
        "/v1/chat/completions", json={**body, "stream": True, "stream_options": {"include_usage": True}}
    )
    assert raw.headers["content-type"].startswith("text/event-stream")
    events = sse_events(raw.text)
    assert events[-1] == "[DONE]"
    chunks = [json.loads(e) for e in events[:-1]]
    assert all(c["object"] == "chat.completion.chunk" and c["id"] == chunks[0]["id"] for c in chunks)
    assert chunks[0]["choices"][0]["delta"]["role"] == "assistant"
    usage_chunk = chunks[-1]
    assert usage_chunk["choices"] == [] and usage_chunk["usage"] == plain["usage"]
    finish = [c["choices"][0]["finish_reason"] for c in chunks[:-1]]
    assert finish[:-1] == [None] * (len(finish) - 1) and finish[-1] == choice["finish_reason"]
    text = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks[:-1])
    assert text == choice["message"]["content"]
    usage = plain["usage"]
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]


def test_no_usage_chunk_unless_asked(http: httpx.Client) -> None:
    raw = http.post("/v1/chat/completions", json=chat_body(words(20), max_tokens=3, stream=True))
    chunks = [json.loads(e) for e in sse_events(raw.text)[:-1]]
    assert all("usage" not in c and c["choices"] for c in chunks)


def test_finish_reason_length_when_max_tokens_is_small(http: httpx.Client) -> None:
    for limit in ({"max_tokens": 2}, {"max_completion_tokens": 2}):
        out = http.post(
            "/v1/chat/completions", json=chat_body("Tell me everything. " + words(50), **limit)
        ).json()
        assert out["choices"][0]["finish_reason"] == "length"
        assert out["usage"]["completion_tokens"] == 2


def test_over_long_prompt_gets_sglang_400(http: httpx.Client) -> None:
    content = words(CONTEXT + 500, seed=3)
    count = http.post("/v1/tokenize", json={"messages": [{"role": "user", "content": content}]}).json()[
        "count"
    ]
    assert count >= CONTEXT
    expected = f"The input ({count} tokens) is longer than the model's context length ({CONTEXT} tokens)."
    for stream in (False, True):
        response = http.post("/v1/chat/completions", json=chat_body(content, max_tokens=8, stream=stream))
        assert response.status_code == 400
        body = response.json()
        assert body == {
            "object": "error",
            "message": expected,
            "type": "BadRequestError",
            "param": None,
            "code": 400,
        }
    generate = http.post("/generate", json={"text": content, "sampling_params": {"max_new_tokens": 8}})
    assert generate.status_code == 400
    assert generate.json()["error"]["message"].startswith("The input (")


def test_prompt_plus_max_tokens_beyond_context_gets_sglang_400(http: httpx.Client) -> None:
    content = words(100, seed=4)
    count = http.post("/v1/tokenize", json={"messages": [{"role": "user", "content": content}]}).json()[
        "count"
    ]
    response = http.post("/v1/chat/completions", json=chat_body(content, max_tokens=CONTEXT))
    assert response.status_code == 400
    assert response.json()["message"].startswith(
        f"Requested token count exceeds the model's maximum context length of {CONTEXT} tokens. "
        f"You requested a total of {count + CONTEXT} tokens: {count} tokens from the input messages"
    )


def test_non_json_body_is_refused_like_sglang(http: httpx.Client) -> None:
    response = http.post("/v1/chat/completions", content=b"hello", headers={"content-type": "text/plain"})
    assert response.status_code == 400 and "Only 'application/json' is allowed" in response.json()["message"]


# ----- /generate -----


def test_generate_shapes_and_streaming(http: httpx.Client) -> None:
    body = {"text": words(60, seed=5), "sampling_params": {"max_new_tokens": 5, "temperature": 0.7}}
    out = http.post("/generate", json=body).json()
    meta = out["meta_info"]
    assert meta["completion_tokens"] == len(out["output_ids"]) <= 5
    assert meta["finish_reason"]["type"] in ("stop", "length") and meta["e2e_latency"] > 0
    assert "indexer_topk" not in meta
    events = sse_events(http.post("/generate", json={**body, "stream": True}).text)
    assert events[-1] == "[DONE]"
    chunks = [json.loads(e) for e in events[:-1]]
    assert [c["meta_info"]["completion_tokens"] for c in chunks] == list(range(1, len(chunks) + 1))
    assert chunks[-1]["text"] == out["text"] and chunks[-1]["output_ids"] == out["output_ids"]
    assert chunks[-1]["meta_info"]["finish_reason"] == meta["finish_reason"]


def test_generate_indexer_topk_decodes_to_sglang_shape(http: httpx.Client) -> None:
    info = http.get("/server_info").json()
    layers, k = info["num_indexer_layers"], info["index_topk"]
    body = {
        "text": words(2000, seed=6),
        "sampling_params": {"max_new_tokens": 3},
        "return_indexer_topk": True,
    }
    out = http.post("/generate", json=body).json()
    meta = out["meta_info"]
    flat = np.frombuffer(base64.b64decode(meta["indexer_topk"]), dtype=np.int32)
    prompt, completion = meta["prompt_tokens"], meta["completion_tokens"]
    topk = flat.reshape(-1, layers, k)
    assert topk.shape == (prompt + completion - 1, layers, k)
    assert (topk[: prompt - 1] == -1).all()  # prompt positions other than the last are not reported
    reported = topk[prompt - 1 :]
    assert (reported >= -1).all() and (reported < (prompt + completion) // 4 + 1).all()
    assert (reported >= 0).any(axis=-1).all()  # every layer of every reported row selected some block


# ----- concurrency and cancellation -----


def test_two_simultaneous_requests_both_complete(server: ServerProcess) -> None:
    async def both() -> list[httpx.Response]:
        async with httpx.AsyncClient(base_url=server.base_url, timeout=120.0) as client:
            bodies = [chat_body(words(1500, seed=s), max_tokens=6) for s in (7, 8)]
            return await asyncio.gather(*(client.post("/v1/chat/completions", json=b) for b in bodies))

    responses = asyncio.run(both())
    assert [r.status_code for r in responses] == [200, 200]
    assert all(r.json()["usage"]["completion_tokens"] >= 1 for r in responses)


def wait_idle(http: httpx.Client, before: int, max_tokens: int) -> None:
    """The server drops to no running/queued request soon, having generated fewer than max_tokens."""
    deadline = time.perf_counter() + 10
    while time.perf_counter() < deadline:
        state = http.get("/server_info").json()["internal_states"][0]
        if state["#running-req"] == 0 and state["#queue-req"] == 0:
            assert state["generated_tokens_total"] - before < max_tokens
            assert state["free_kv_tokens"] == POOL  # the request's KV slots are back in the pool
            return
        time.sleep(0.1)
    raise AssertionError(f"generation still running 10 s after the client left: {state}")


def test_streaming_client_disconnect_stops_generation(server: ServerProcess, http: httpx.Client) -> None:
    body = chat_body("Count forever. " + words(50), max_tokens=4000, stream=True)
    before = http.get("/server_info").json()["internal_states"][0]["generated_tokens_total"]
    with httpx.Client(base_url=server.base_url, timeout=60.0) as client:
        with client.stream("POST", "/v1/chat/completions", json=body) as response:
            seen = 0
            for line in response.iter_lines():
                seen += line.startswith("data: ")
                if seen >= 3:
                    break
    wait_idle(http, before, 4000)


def test_non_streaming_client_disconnect_stops_generation(server: ServerProcess, http: httpx.Client) -> None:
    # ignore_eos (SGLang's sampling parameter): the model would otherwise answer and stop in time
    body = {
        "text": "Count forever. " + words(50),
        "sampling_params": {"max_new_tokens": 4000, "ignore_eos": True},
    }
    before = http.get("/server_info").json()["internal_states"][0]["generated_tokens_total"]
    with httpx.Client(base_url=server.base_url, timeout=1.5) as client, pytest.raises(httpx.ReadTimeout):
        client.post("/generate", json=body)
    wait_idle(http, before, 4000)


def test_token_ids_outside_the_vocabulary_are_a_400(http: httpx.Client) -> None:
    response = http.post(
        "/generate", json={"input_ids": [1, 2, 10**9], "sampling_params": {"max_new_tokens": 2}}
    )
    assert response.status_code == 400 and "error" in response.json()


# ----- SGLang's scheduler-level refusal and a full pool -----


def test_prompt_that_leaves_no_room_is_aborted_like_sglang(http: httpx.Client) -> None:
    info = http.get("/server_info").json()
    limit = info["max_req_input_len"]  # min(context - 1, pool - 1) - 5, as SGLang computes it
    assert limit == min(CONTEXT - 1, POOL - 1) - 5
    tokens = http.post("/v1/tokenize", json={"prompt": words(CONTEXT, seed=9)}).json()["tokens"][: limit + 1]
    expected = (
        f"Input length ({limit + 1} tokens) exceeds the maximum allowed length ({limit} tokens). "
        "Use a shorter input or enable --allow-auto-truncate."
    )
    body = {"input_ids": tokens, "sampling_params": {"max_new_tokens": 2}}
    plain = http.post("/generate", json=body)
    assert plain.status_code == 400 and plain.json() == {"error": {"message": expected}}
    events = sse_events(http.post("/generate", json={**body, "stream": True}).text)
    finish = json.loads(events[0])["meta_info"]["finish_reason"]
    assert finish == {"type": "abort", "message": expected, "status_code": 400, "err_type": "BadRequestError"}
    assert events[-1] == "[DONE]"


def test_requests_wait_for_kv_room_and_all_complete(tmp_path: Path) -> None:
    started = time.perf_counter()
    small = start_server(tmp_path, "--context-length", "2048", "--max-total-tokens", "2048")
    try:
        wait_ready(small, READY_DEADLINE_S, started)

        async def three() -> list[httpx.Response]:
            async with httpx.AsyncClient(base_url=small.base_url, timeout=120.0) as client:
                ids = (await client.post("/v1/tokenize", json={"prompt": words(1200, seed=10)})).json()[
                    "tokens"
                ]
                body = {"input_ids": ids[:900], "sampling_params": {"max_new_tokens": 40}}
                return await asyncio.gather(*(client.post("/generate", json=body) for _ in range(3)))

        responses = asyncio.run(three())  # 940 slots each: only two fit the 2048-slot pool at once
        assert [r.status_code for r in responses] == [200, 200, 200]
        assert len({tuple(r.json()["output_ids"]) for r in responses}) == 1  # greedy: same output
    finally:
        small.stop()
