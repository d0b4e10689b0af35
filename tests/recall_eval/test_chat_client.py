"""The streaming client: SSE parsing, timing fields, think-tag split, error kinds and retries.

These are unit tests of the client alone, so the HTTP layer is httpx.MockTransport; the client is
exercised against the real reference server in tests/e2e.
"""

from __future__ import annotations

import asyncio
import gzip
import json
import time

import httpx
import pytest

from recall_eval.chat_client import (
    ChatClient,
    RequestFailed,
    classify_error_message,
    split_thinking,
)
from recall_eval.event_stream import read_event_stream
from recall_eval.transport import Timeouts
from recall_eval.types import ChatMessage, Endpoint

MESSAGES = (ChatMessage(role="user", content="What is the code?"),)
ENDPOINT = Endpoint(base_url="http://test", model="m")


def _sse(*events: dict | str) -> bytes:
    lines = []
    for event in events:
        payload = event if isinstance(event, str) else json.dumps(event)
        lines.append(f"data: {payload}\n\n")
    return "".join(lines).encode()


def _chunk(content: str | None = None, reasoning: str | None = None, finish: str | None = None) -> dict:
    delta = {}
    if content is not None:
        delta["content"] = content
    if reasoning is not None:
        delta["reasoning_content"] = reasoning
    return {"choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}


def _client(handler, retries: int = 2) -> ChatClient:
    http = httpx.AsyncClient(transport=httpx.MockTransport(handler))
    return ChatClient(ENDPOINT, http, request_timeout_s=5, retries=retries, backoff_s=0.001)


@pytest.mark.parametrize(
    ("content", "answer", "thinking"),
    [
        ("ZEBRA-1", "ZEBRA-1", ""),
        ("<think>let me see</think>ZEBRA-1", "ZEBRA-1", "let me see"),
        ("<think>a</think> x <think>b</think> y", "x  y", "a\nb"),
        ("recalling...</think>\nZEBRA-1", "ZEBRA-1", "recalling..."),
        ("<think>still thinking when the budget ran", "", "still thinking when the budget ran"),
        ("answer <think>tail", "answer", "tail"),
    ],
)
def test_split_thinking(content, answer, thinking):
    assert split_thinking(content) == (answer, thinking)


def test_classify_error_message():
    assert (
        classify_error_message(
            "The input (5000 tokens) is longer than the model's context length (4096 tokens).", 400
        )
        == "too_long"
    )
    assert (
        classify_error_message(
            "Requested token count exceeds the model's maximum context length of 4096", 400
        )
        == "too_long"
    )
    assert classify_error_message("bad temperature", 400) == "rejected"
    assert classify_error_message("boom", 503) == "server"


def test_too_long_needs_a_4xx_and_a_too_long_message():
    sglang = "The input (5000 tokens) is longer than the model's context length (4096 tokens)."
    assert classify_error_message(sglang, 413) == "too_long"
    # a server failure that mentions the context length is a server failure
    assert classify_error_message(sglang, 500) == "server"
    assert classify_error_message(sglang, None) == "rejected"  # an error event without a status code
    # a bare mention of "context length" is no verdict on the prompt
    assert classify_error_message("context length must be a positive integer", 400) == "rejected"
    openai = "This model's maximum context length is 8192 tokens. However, you requested 9000 tokens"
    assert classify_error_message(openai, 400) == "too_long"


async def test_stream_parsed_with_usage_and_timings():
    seen = {}

    def handler(request: httpx.Request) -> httpx.Response:
        seen.update(json.loads(request.content))
        body = _sse(
            {"choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}]},
            _chunk(reasoning="hmm"),
            _chunk(content="ZEB"),
            _chunk(content="RA-1"),
            _chunk(finish="stop"),
            {"choices": [], "usage": {"prompt_tokens": 42, "completion_tokens": 3, "total_tokens": 45}},
            "[DONE]",
        )
        return httpx.Response(200, content=body, headers={"content-type": "text/event-stream"})

    completion = await _client(handler).complete(MESSAGES, max_tokens=16)
    assert seen["stream"] is True and seen["temperature"] == 0 and seen["max_tokens"] == 16
    assert seen["stream_options"] == {"include_usage": True}
    assert completion.text == "ZEBRA-1"
    assert completion.reasoning == "hmm"
    assert completion.finish_reason == "stop"
    assert (completion.prompt_tokens, completion.completion_tokens) == (42, 3)
    assert completion.ttft_s is not None and completion.ttft_s >= 0
    assert len(completion.itl_s) == 2
    assert completion.latency_s >= completion.ttft_s


async def test_without_usage_counts_text_chunks():
    def handler(request):
        return httpx.Response(200, content=_sse(_chunk("a"), _chunk("b"), _chunk(finish="length"), "[DONE]"))

    completion = await _client(handler).complete(MESSAGES, 2)
    assert completion.completion_tokens == 2 and completion.prompt_tokens is None
    assert completion.finish_reason == "length"


async def test_400_context_length_is_too_long_and_not_retried():
    calls = []

    def handler(request):
        calls.append(1)
        body = {
            "object": "error",
            "message": "The input (9000 tokens) is longer than the model's context length (8192 tokens).",
            "type": "BadRequestError",
            "code": 400,
        }
        return httpx.Response(400, json=body)

    with pytest.raises(RequestFailed) as info:
        await _client(handler).complete(MESSAGES, 2)
    assert info.value.kind == "too_long" and info.value.status == 400
    assert len(calls) == 1


async def test_other_4xx_not_retried():
    calls = []

    def handler(request):
        calls.append(1)
        return httpx.Response(422, json={"detail": "bad field"})

    with pytest.raises(RequestFailed) as info:
        await _client(handler).complete(MESSAGES, 2)
    assert info.value.kind == "rejected" and "bad field" in str(info.value)
    assert len(calls) == 1


async def test_5xx_retried_then_succeeds():
    calls = []

    def handler(request):
        calls.append(1)
        if len(calls) < 3:
            return httpx.Response(503, text="overloaded")
        return httpx.Response(200, content=_sse(_chunk("ok"), _chunk(finish="stop"), "[DONE]"))

    completion = await _client(handler, retries=2).complete(MESSAGES, 2)
    assert completion.text == "ok" and len(calls) == 3


async def test_connection_errors_retried_then_reported():
    calls = []

    def handler(request):
        calls.append(1)
        raise httpx.ConnectError("refused")

    with pytest.raises(RequestFailed) as info:
        await _client(handler, retries=2).complete(MESSAGES, 2)
    assert info.value.kind == "connection" and info.value.attempts == 3
    assert len(calls) == 3


async def test_give_up_stops_retries():
    calls = []

    def handler(request):
        calls.append(1)
        raise httpx.ConnectError("refused")

    with pytest.raises(RequestFailed):
        await _client(handler, retries=5).complete(MESSAGES, 2, give_up=lambda: True)
    assert len(calls) == 1


async def test_error_event_in_stream():
    def handler(request):
        error = {
            "error": {
                "object": "error",
                "message": "Generation aborted.",
                "type": "SERVICE_UNAVAILABLE",
                "code": 503,
            }
        }
        return httpx.Response(200, content=_sse(_chunk("a"), error, "[DONE]"))

    with pytest.raises(RequestFailed) as info:
        await _client(handler, retries=0).complete(MESSAGES, 2)
    assert info.value.kind == "server"


async def test_event_times_are_taken_when_their_bytes_arrive_not_when_parsed():
    """Events that arrive in one network chunk share its arrival time, however long each takes to
    handle; an event split across chunks gets the time its last bytes came; a later chunk is stamped
    later (unit test of read_event_stream over a mock transport)."""

    def event(text: str) -> bytes:
        return f"data: {json.dumps({'choices': [{'delta': {'content': text}}]})}\n\n".encode()

    class Chunks(httpx.AsyncByteStream):
        async def __aiter__(self):
            yield event("a") + event("b") + event("c")[:10]
            yield event("c")[10:]
            await asyncio.sleep(0.2)
            yield event("d") + b"data: [DONE]\n\n"

    transport = httpx.MockTransport(lambda request: httpx.Response(200, stream=Chunks()))
    seen: list[tuple[str, float]] = []

    def handle(data, arrived: float) -> None:
        seen.append((data["choices"][0]["delta"]["content"], arrived))
        time.sleep(0.05)  # slow handling must not move the times of events already received

    async with httpx.AsyncClient(transport=transport) as http:
        async with http.stream("POST", "http://test/v1/chat/completions") as response:
            await read_event_stream(response, handle)
    (a, t_a), (b, t_b), (c, t_c), (d, t_d) = seen
    assert (a, b, c, d) == ("a", "b", "c", "d")
    assert t_a == t_b  # one chunk, one arrival time (parsing b came 50 ms later)
    assert t_c > t_b and t_d - t_c >= 0.2


def _text_event(text: str) -> bytes:
    return f"data: {json.dumps({'choices': [{'delta': {'content': text}}]})}\n\n".encode()


async def _read_with_limits(chunks, limits: Timeouts) -> tuple[list[str], float]:
    class Body(httpx.AsyncByteStream):
        async def __aiter__(self):
            for chunk in chunks:
                if isinstance(chunk, float):
                    await asyncio.sleep(chunk)
                else:
                    yield chunk

    transport = httpx.MockTransport(lambda request: httpx.Response(200, stream=Body()))
    texts: list[str] = []

    def handle(data, arrived: float) -> bool:
        text = data["choices"][0]["delta"].get("content") or ""
        texts.append(text)
        return bool(text)

    started = time.perf_counter()
    async with httpx.AsyncClient(transport=transport) as http:
        async with http.stream("POST", "http://test/v1/chat/completions") as response:
            await read_event_stream(response, handle, limits)
    return texts, time.perf_counter() - started


async def test_stream_limits_apply_to_each_gap_between_chunks_not_to_the_whole_stream():
    """Keep-alive comments and role-only events reset the first-token limit, text resets the idle
    limit: a stream that never pauses for 0.3 s finishes, however long it runs in all."""
    limits = Timeouts(connect_s=1, first_token_s=0.3, idle_s=0.3, total_s=10)
    role_only = b'data: {"choices": [{"delta": {"role": "assistant"}}]}\n\n'
    chunks = [b": keep-alive\n\n", 0.15, b": keep-alive\n\n", 0.15, role_only, 0.15, role_only, 0.15]
    for index in range(6):
        chunks += [_text_event(str(index)), 0.15]
    texts, seconds = await _read_with_limits([*chunks, b"data: [DONE]\n\n"], limits)
    assert [text for text in texts if text] == ["0", "1", "2", "3", "4", "5"]
    assert seconds > 1.2  # four times either limit


@pytest.mark.parametrize(
    ("chunks", "message"),
    [
        ([b": keep-alive\n\n", 5.0], "no first token within 0.3s"),
        ([_text_event("a"), 0.1, _text_event("b"), 5.0], "no data within 0.5s"),
    ],
)
async def test_a_stall_inside_the_stream_is_cut_at_the_limit_of_its_phase(chunks, message):
    limits = Timeouts(connect_s=1, first_token_s=0.3, idle_s=0.5, total_s=10)
    started = time.perf_counter()
    with pytest.raises(RequestFailed) as info:
        await _read_with_limits(chunks, limits)
    assert info.value.kind == "timeout" and str(info.value) == message
    assert 0.3 <= time.perf_counter() - started < 2


async def test_a_compressed_event_stream_is_decoded_before_parsing():
    """A proxy may gzip the stream: the reader then goes through httpx's decoders, not the raw bytes."""
    body = gzip.compress(_text_event("a") + _text_event("b") + b"data: [DONE]\n\n")
    transport = httpx.MockTransport(
        lambda request: httpx.Response(200, headers={"content-encoding": "gzip"}, content=body)
    )
    texts: list[str] = []
    async with httpx.AsyncClient(transport=transport) as http:
        async with http.stream("POST", "http://test/v1/chat/completions") as response:
            done = await read_event_stream(
                response, lambda data, arrived: texts.append(data["choices"][0]["delta"]["content"])
            )
    assert done and texts == ["a", "b"]
