"""The event-stream connections (recall_eval.stream_connection) over real sockets: a scripted HTTP/1.1
server in the test's own loop answers each request with the chunks (bytes) and pauses (floats) it is
given, so limits, errors, keep-alive reuse and stale connections are exercised byte for byte."""

from __future__ import annotations

import asyncio
import json
import time

import pytest

from recall_eval import stream_connection
from recall_eval.chat_client import MAX_ANSWER_CHARS, ChatClient
from recall_eval.http_client import make_http_client
from recall_eval.stream_connection import EventStreamPool, stream_connections_enabled
from recall_eval.transport import RequestFailed, Timeouts
from recall_eval.types import ChatMessage, Endpoint

LIMITS = Timeouts(connect_s=2, first_token_s=0.3, idle_s=0.5, total_s=10)
pytestmark = pytest.mark.both_loops  # the CLI runs on uvloop (recall_eval.event_loop), unit tests on asyncio


def _event(text: str) -> bytes:
    return f"data: {json.dumps({'choices': [{'delta': {'content': text}}]})}\n\n".encode()


def _chunked(piece: bytes) -> bytes:
    return f"{len(piece):x}\r\n".encode() + piece + b"\r\n"


OK_HEAD = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"


async def _read_request(reader: asyncio.StreamReader) -> bytes:
    """One request off the socket (head, then its Content-Length body); returns the head."""
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.split(b"\r\n")
    length = next(int(line.split(b":")[1]) for line in lines if line.lower().startswith(b"content-length"))
    await reader.readexactly(length)
    return head


class ScriptedServer:
    """Each request gets the next script: a list of raw bytes to write and floats to sleep; a script
    ending in "close" closes the connection after it. Counts connections and requests."""

    def __init__(self, scripts):
        self.scripts, self.connections, self.requests = list(scripts), 0, 0

    async def __aenter__(self):
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.url = f"http://127.0.0.1:{self.server.sockets[0].getsockname()[1]}/v1/chat/completions"
        return self

    async def __aexit__(self, *exc):
        self.server.close()

    async def _serve(self, reader, writer):
        self.connections += 1
        try:
            while True:
                await _read_request(reader)
                self.requests += 1
                for step in self.scripts.pop(0):
                    if step == "close":
                        writer.close()
                        return
                    if isinstance(step, float):
                        await asyncio.sleep(step)
                    else:
                        writer.write(step)
                        await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            writer.close()


def _answer(*texts: str) -> list:
    return [OK_HEAD, *(_chunked(_event(t)) for t in texts), _chunked(b"data: [DONE]\n\n"), b"0\r\n\r\n"]


async def _read(
    pool: EventStreamPool, url: str, limits: Timeouts = LIMITS
) -> tuple[bool, list[tuple[str, float]]]:
    seen: list[tuple[str, float]] = []

    def handle(data, arrived):
        text = data["choices"][0]["delta"].get("content") or ""
        seen.append((text, arrived))
        return bool(text)

    return await pool.post_event_stream(url, b"{}", handle, limits), seen


async def test_answers_reuse_one_kept_alive_connection_and_times_come_from_arrival():
    scripts = [
        [
            OK_HEAD,
            _chunked(_event("a")),
            0.2,
            _chunked(_event("b")),
            _chunked(b"data: [DONE]\n\n"),
            b"0\r\n\r\n",
        ]
    ]
    scripts += [_answer("c", "d") for _ in range(3)]
    async with ScriptedServer(scripts) as server:
        pool = EventStreamPool([], connect_s=2)
        done, seen = await _read(pool, server.url)
        assert done and [t for t, _ in seen] == ["a", "b"] and seen[1][1] - seen[0][1] >= 0.19
        for _ in range(3):
            done, seen = await _read(pool, server.url)
            assert done and [t for t, _ in seen] == ["c", "d"]
        pool.close()
    assert server.requests == 4 and server.connections == 1


async def test_a_connection_the_server_closed_while_idle_is_replaced_once():
    async with ScriptedServer([[*_answer("a"), "close"], _answer("b")]) as server:
        pool = EventStreamPool([], connect_s=2)
        assert (await _read(pool, server.url))[0]
        await asyncio.sleep(0.1)  # the pooled connection is now closed by the server
        done, seen = await _read(pool, server.url)
        pool.close()
    assert done and [t for t, _ in seen] == ["b"] and server.connections == 2


@pytest.mark.parametrize(
    ("script", "kind", "message"),
    [
        ([OK_HEAD, _chunked(b": keep-alive\n\n"), 5.0], "timeout", "no first token within 0.3s"),
        ([OK_HEAD, _chunked(_event("a")), 0.1, _chunked(_event("b")), 5.0], "timeout", "no data within 0.5s"),
        ([OK_HEAD, _chunked(_event("a")), "close"], "connection", "the answer broke off"),
        ([OK_HEAD, _chunked(b"data: {not json\n\n"), b"0\r\n\r\n"], "protocol", "malformed stream event"),
        (
            [b"HTTP/1.1 200 OK\r\ncontent-type: text/html\r\ncontent-length: 29\r\n\r\n<html>502 from a proxy</html>"],
            "protocol", "not an event stream",
        ),
        (
            [b"HTTP/1.1 200 OK\r\ncontent-type: text/html\r\n\r\n<html>bad gateway</html>", "close"],
            "protocol", "not an event stream",
        ),
        (
            [b"HTTP/1.1 400 Bad Request\r\ncontent-length: 71\r\n\r\n",
             b'{"error": {"message": "longer than the model\'s context length (9 > 8)"}}'[:71]],
            "too_long", "HTTP 400",
        ),
        (
            [b"HTTP/1.1 429 Too Many\r\nretry-after: 7\r\ncontent-length: 2\r\n\r\n{}"],
            "server", "HTTP 429",
        ),
    ],
)  # fmt: skip
async def test_failures_are_the_same_kinds_as_through_httpx(script, kind, message):
    async with ScriptedServer([script]) as server:
        pool = EventStreamPool([], connect_s=2)
        started = time.perf_counter()
        with pytest.raises(RequestFailed) as info:
            await _read(pool, server.url)
        pool.close()
    assert info.value.kind == kind and message in str(info.value), str(info.value)
    assert time.perf_counter() - started < 2
    if "429" in message:
        assert info.value.retry_after_s == 7


async def test_chat_client_takes_the_event_stream_path_with_auth_and_falls_back_to_httpx(monkeypatch):
    """Through ChatClient and the run's client: the key travels on the fast path too; with
    RECALL_EVAL_HTTP=httpx the same answer comes through httpx (no pool)."""
    seen_heads: list[bytes] = []

    async def serve(reader, writer):
        seen_heads.append(await _read_request(reader))
        writer.write(b"".join(_answer("CODE-1")))
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    base = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"
    from recall_eval.transport import ServerAuth

    messages = (ChatMessage(role="user", content="hi"),)
    for mode in ("", "httpx"):
        monkeypatch.setenv("RECALL_EVAL_HTTP", mode)
        async with make_http_client(ServerAuth(api_key="sk-test-123")) as http:
            assert (http.event_streams is None) == (mode == "httpx")
            client = ChatClient(Endpoint(base_url=base, model="m"), http, request_timeout_s=5)
            completion = await client.complete(messages, 8)
        assert completion.text == "CODE-1" and completion.ttft_s is not None
    server.close()
    assert len(seen_heads) == 2 and all(
        b"authorization: Bearer sk-test-123" in h.replace(b"Authorization", b"authorization")
        for h in seen_heads
    )


async def test_a_done_split_across_two_chunks_then_a_stall_is_a_finished_answer():
    """After text flows, chunks are kept and decoded in batches: a [DONE] cut in two (no chunk
    holds it whole) followed by a stall still ends the answer as done, with every event's text."""
    script = [
        OK_HEAD, _chunked(_event("a")), _chunked(_event("b")), _chunked(b"data: [DO"), 0.05,
        _chunked(b"NE]\n\n"), 5.0,
    ]  # fmt: skip
    async with ScriptedServer([script]) as server:
        pool = EventStreamPool([], connect_s=2)
        started = time.perf_counter()
        done, seen = await _read(pool, server.url)
        pool.close()
    assert done and [t for t, _ in seen] == ["a", "b"]
    assert time.perf_counter() - started < 2  # ended by the idle limit (0.5 s), not the stall


async def test_a_body_that_the_servers_close_ends_is_read_whole():
    """No length, no chunking: the close is the end of the body (HTTP/1.1 allows it), not a break."""
    head = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n"
    script = [head, _event("a"), 0.05, _event("b"), b"data: [DONE]\n\n", "close"]
    async with ScriptedServer([script]) as server:
        pool = EventStreamPool([], connect_s=2)
        done, seen = await _read(pool, server.url)
        pool.close()
    assert done and [t for t, _ in seen] == ["a", "b"]


async def test_a_long_answer_is_decoded_in_batches_in_order_and_a_runaway_one_is_cut(monkeypatch):
    """Past BATCH_BYTES the kept chunks are decoded without waiting for [DONE]: an answer that
    ignores max_tokens is cut at MAX_ANSWER_CHARS while it streams, keeping what came, in order."""
    monkeypatch.setattr(stream_connection, "BATCH_BYTES", 4096)
    pieces = [f"{index:05d}" + "x" * 395 for index in range(200)]  # 80,000 characters in all
    endless = [OK_HEAD, *(_chunked(_event(piece)) for piece in pieces), 30.0]
    async with ScriptedServer([_answer(*pieces[:30]), endless]) as server:
        pool = EventStreamPool([], connect_s=2)
        done, seen = await _read(pool, server.url, Timeouts(connect_s=2, first_token_s=5, idle_s=60))
        assert done and [t for t, _ in seen] == pieces[:30]
        client = ChatClient(
            Endpoint(base_url=server.url.rsplit("/v1", 1)[0], model="m"), _PoolClient(pool), 60
        )
        with pytest.raises(RequestFailed) as info:
            await client.complete((ChatMessage(role="user", content="hi"),), 8)
        pool.close()
    assert info.value.kind == "protocol" and "ran past" in str(info.value)
    assert info.value.partial == "".join(pieces)[:MAX_ANSWER_CHARS]


async def test_a_body_that_never_ends_after_done_does_not_keep_its_socket(monkeypatch):
    """A server (or proxy) that sends [DONE] and never ends the chunked body: each answer is taken at
    [DONE]; its connection, still waiting for the body's end, is closed once the grace has passed
    instead of staying open for the rest of the sweep."""
    monkeypatch.setattr(stream_connection, "TAIL_GRACE_S", 0.05)
    never_ends = [OK_HEAD, _chunked(_event("a")), _chunked(b"data: [DONE]\n\n"), 30.0]
    used = []
    async with ScriptedServer([never_ends] * 3) as server:
        pool = EventStreamPool([], connect_s=2)
        for _ in range(3):
            done, seen = await _read(pool, server.url)
            assert done and [t for t, _ in seen] == ["a"]
            used.append(pool.idle[("127.0.0.1", int(server.url.split(":")[2].split("/")[0]))][-1])
            await asyncio.sleep(0.1)
        states = [connection.closed for connection in used]
        pool.close()
    assert server.connections == 3 and states == [True, True, False]  # the last is still in its grace


class _PoolClient:
    """The least of a run client that ChatClient needs to take the event-stream path."""

    def __init__(self, pool: EventStreamPool):
        self.event_streams = pool

    def event_streams_for(self, url: str) -> EventStreamPool:
        return self.event_streams


def test_a_header_with_a_line_break_is_refused():
    with pytest.raises(ValueError, match="line break"):
        EventStreamPool([(b"X-Team", b"a\r\nInjected: 1")], connect_s=2)


def test_a_proxied_host_keeps_httpx_and_others_keep_the_fast_reader(monkeypatch):
    """The fast reader is chosen URL by URL with httpx's own proxy decision: a host behind HTTP_PROXY
    goes through httpx; a host in NO_PROXY and loopback (never proxied) keep the fast reader."""
    monkeypatch.delenv("RECALL_EVAL_HTTP", raising=False)
    for name in (
        "http_proxy",
        "HTTP_PROXY",
        "all_proxy",
        "ALL_PROXY",
        "https_proxy",
        "HTTPS_PROXY",
        "no_proxy",
        "NO_PROXY",
    ):
        monkeypatch.delenv(name, raising=False)
    assert stream_connections_enabled()
    monkeypatch.setenv("HTTP_PROXY", "http://proxy.internal:3128")
    monkeypatch.setenv("NO_PROXY", "direct.internal")
    assert stream_connections_enabled()
    client = make_http_client()
    try:
        assert client.event_streams_for("http://gpu.internal:30000/v1/chat/completions") is None
        assert client.event_streams_for("http://direct.internal:30000/v1/chat/completions") is not None
        assert client.event_streams_for("http://127.0.0.1:30000/v1/chat/completions") is not None
        assert client.event_streams_for("https://direct.internal/v1/chat/completions") is None  # TLS: httpx
    finally:
        client.event_streams.close()
