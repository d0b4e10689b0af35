"""Streamed chat requests parsed where their bytes arrive: HTTP/1.1 (httptools) over asyncio protocols.

Why not httpx here: reading an event stream through httpx wakes a task and walks httpx, httpcore
and anyio for every network chunk (~20 per 32-token answer), which costs 2-3 times the CPU of the
whole rest of the harness (`python -m tests.benchmarks.bench_harness --floor`). Here each chunk is
stamped with the time it came off the socket inside the protocol's data_received callback and
parsed there by httptools (llhttp, the C parser uvicorn uses); one future per request wakes the
caller at [DONE]. Until generated text flows every chunk's events are decoded at once (the
first-token limit needs to know when text starts); after that chunks are kept with their arrival
times and decoded in one pass at a chunk holding [DONE], at the end of the body, on a failure, or
every BATCH_BYTES, so a token costs the loop little more than the socket read (see bench_harness).

Used by ChatClient for http:// servers that no proxy stands in front of (RunClient.event_streams_for:
the same proxy and NO_PROXY decision httpx makes for that URL); https, a proxied host, or
RECALL_EVAL_HTTP=httpx keep the httpx path, and every other request (probes,
tokenize, /generate) always goes through httpx. Errors are the same RequestFailed kinds as the httpx
path: an error status via transport.status_failure, a dropped connection as `connection`, a stall
as `timeout` (event_stream.GapWatchdog), a bad stream as `protocol` (event_stream.EventStreamParser).
A one-body JSON answer (a server that ignored stream: true) is read whole and handed over as one
event (event_stream.json_answer_event); a redirect is named, not followed; userinfo in the URL is sent
as HTTP Basic auth, as httpx does.
"""

from __future__ import annotations

import asyncio
import os
import time
import zlib
from collections.abc import Callable, Iterable
from typing import Any

import httptools
import httpx

from recall_eval.event_stream import (
    EventStreamParser,
    GapWatchdog,
    error_text,
    feed_chunk,
    is_json_answer,
    json_answer_event,
    redirect_failure,
)
from recall_eval.server_url import basic_auth_header
from recall_eval.transport import RequestFailed, Timeouts, has_line_break, status_failure

HTTP_ENV = "RECALL_EVAL_HTTP"  # "httpx": every request through httpx (a fallback, and for comparison)
MAX_ERROR_BODY = 65_536  # bytes of an error answer kept for its message
BATCH_BYTES = 65_536  # once text flows, undecoded chunks are decoded when this many bytes wait
TAIL_GRACE_S = 2.0  # how long an answered connection may take to end its body before it is closed
_HEADERS_WE_SET = frozenset({b"host", b"content-length", b"content-type", b"accept-encoding", b"connection"})
_DONE = b"[DONE]"


def stream_connections_enabled() -> bool:
    """Off when RECALL_EVAL_HTTP=httpx (proxied hosts are left to httpx URL by URL: RunClient)."""
    return os.environ.get(HTTP_ENV, "").strip().lower() != "httpx"


class _Exchange:
    """One request's response as it arrives: status, then an event stream (or an error body)."""

    def __init__(
        self,
        on_event: Callable[[Any, float], object],
        limits: Timeouts,
        on_expire: Callable[[], None],
        url: str = "",
    ):
        self.url = url  # where the request went (a redirect's location is resolved against it)
        self.result: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        self.parser = EventStreamParser(on_event)
        self.watchdog = GapWatchdog(on_expire, limits)
        self.status = 0
        self.headers: dict[bytes, bytes] = {}
        self.error_body = bytearray()
        self.json_body: bytearray | None = None  # a one-body JSON answer, read whole
        self.inflate: Any = None  # a zlib decompressor when the server compressed the stream anyway
        self.flowing = False  # generated text arrived: later chunks are kept, decoded in batches
        self.waiting: list[tuple[float, bytes]] = []  # chunks not decoded yet, with arrival times
        self.waiting_bytes = 0

    def response(self, status: int, headers: dict[bytes, bytes]) -> None:
        self.status, self.headers = status, headers
        encoding = headers.get(b"content-encoding", b"identity").strip().lower()
        if encoding in (b"gzip", b"x-gzip"):
            self.inflate = zlib.decompressobj(16 + zlib.MAX_WBITS)
        elif encoding == b"deflate":
            self.inflate = zlib.decompressobj()
        elif encoding not in (b"", b"identity"):
            raise RequestFailed(
                "protocol",
                f"the stream is compressed with {encoding.decode()!r}; set {HTTP_ENV}=httpx to decode it",
            )
        if is_json_answer(status, headers.get(b"content-type")):
            self.json_body = bytearray()

    def data(self, chunk: bytes, arrived: float) -> None:
        if self.flowing:  # the common case, once per token: keep the chunk, decode later
            self.watchdog.chunk(arrived)
            self.waiting.append((arrived, chunk))
            self.waiting_bytes += len(chunk)
            if _DONE in chunk or self.waiting_bytes >= BATCH_BYTES:
                self.decode_waiting()
                if self.parser.done:
                    self.finish(True)
            return
        if self.result.done():  # after [DONE]: the rest of the body is read only to reuse the connection
            return
        if self.inflate is not None:
            chunk = self.inflate.decompress(chunk)
        if self.status >= 400 or 300 <= self.status < 400:
            self.error_body += chunk[: MAX_ERROR_BODY - len(self.error_body)]
            return
        if self.json_body is not None:
            self.watchdog.chunk(arrived)
            self.json_body += chunk
            return
        feed_chunk(self.parser, self.watchdog, chunk, arrived)  # decoded now: limits switch on the first text
        if self.parser.done:
            self.finish(True)
        elif self.parser.text_started:
            self.flowing = self.inflate is None

    def decode_waiting(self) -> None:
        """Decode the kept chunks, each event with the arrival time of the chunk that completed it."""
        waiting, self.waiting, self.waiting_bytes = self.waiting, [], 0
        for arrived, chunk in waiting:
            self.parser.feed(chunk, arrived)

    def end(self, arrived: float) -> None:
        self.flowing = False
        if self.status >= 400:
            retry_after = self.headers.get(b"retry-after")
            message = error_text(bytes(self.error_body))
            self.fail(
                status_failure(self.status, message, retry_after.decode("latin-1") if retry_after else None)
            )
        elif 300 <= self.status < 400:
            location = self.headers.get(b"location")
            where = location.decode("latin-1") if location else None
            self.fail(redirect_failure(self.status, where, self.url))
        elif self.json_body is not None and not self.result.done():
            self.parser.on_event(json_answer_event(bytes(self.json_body)), arrived)
            self.finish(True)
        elif not self.result.done():
            self.decode_waiting()
            self.finish(self.parser.finish(arrived))

    def finish(self, done: bool) -> None:
        self.flowing = False
        self.watchdog.stop()
        if not self.result.done():
            self.result.set_result(done)

    def fail(self, error: BaseException) -> None:
        """End with an error, unless the kept chunks held the [DONE] (a [DONE] split across two
        chunks, then a stall or a close): what arrived is decoded first, for the caller's partial."""
        self.flowing = False
        self.watchdog.stop()
        if self.result.done():
            return
        try:
            self.decode_waiting()
        except RequestFailed:
            pass  # the failure being reported comes first
        if self.parser.done:
            self.result.set_result(True)
        else:
            self.result.set_exception(error)


class _Connection(asyncio.Protocol):
    """One keep-alive HTTP/1.1 connection; at most one exchange at a time. httptools calls the on_*
    methods from inside feed_data, in data_received, as it parses each chunk."""

    def __init__(self) -> None:
        self.parser = httptools.HttpResponseParser(self)
        self.transport: asyncio.Transport | None = None
        self.exchange: _Exchange | None = None
        self.closed = False
        self.answered = False  # the current request got response bytes (a stale connection gets none)
        self.was_reused = False  # taken from the pool (may have been closed by the server meanwhile)
        self.in_response = False  # between a response's first byte and its end
        self.header_list: list[tuple[bytes, bytes]] = []
        self.status = 0
        self.keep_alive = True
        self.ends_at_close = False  # a body without length or chunking: the server's close ends it
        self.arrived = 0.0
        self.tail_since = 0.0  # when the caller got its answer and left the rest of the body to read

    @property
    def reusable(self) -> bool:
        return not self.closed and self.exchange is None and not self.in_response

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def send(self, request: bytes, exchange: _Exchange) -> None:
        self.exchange, self.answered = exchange, False
        assert self.transport is not None
        self.transport.write(request)

    def data_received(self, data: bytes) -> None:
        self.arrived = time.perf_counter()
        if self.exchange is None:  # bytes nobody asked for: the connection is not safe to reuse
            self.close()
            return
        self.answered = True
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserCallbackError as err:
            # RequestFailed from a callback: a bad stream, an oversized answer, an error event
            cause = err.__context__
            self.break_off(cause if isinstance(cause, Exception) else err)
        except httptools.HttpParserError as err:
            self.break_off(RequestFailed("connection", f"the answer broke off: {err}"))

    # httptools callbacks
    def on_message_begin(self) -> None:
        self.in_response, self.header_list = True, []

    def on_header(self, name: bytes, value: bytes) -> None:
        self.header_list.append((name, value))

    def on_headers_complete(self) -> None:
        self.status = self.parser.get_status_code()
        if self.status < 200:  # 100 Continue and friends: the real answer follows
            return
        headers = {name.lower(): value for name, value in self.header_list}
        self.keep_alive = self.parser.should_keep_alive()
        chunked = b"chunked" in headers.get(b"transfer-encoding", b"").lower()
        self.ends_at_close = (
            not chunked and b"content-length" not in headers and self.status not in (204, 304)
        )
        if self.exchange is not None:
            self.exchange.response(self.status, headers)

    def on_body(self, body: bytes) -> None:
        if self.exchange is not None:
            self.exchange.data(body, self.arrived)

    def on_message_complete(self) -> None:
        if self.status < 200:
            return
        self.in_response = False
        if self.exchange is not None:
            self.exchange.end(self.arrived)  # if it raises, data_received fails this exchange
        self.exchange = None
        if not self.keep_alive:
            self.close()

    def eof_received(self) -> bool:
        return False  # the transport closes; connection_lost decides what the end of the bytes means

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        exchange, self.exchange = self.exchange, None
        if exchange is None:
            return
        if exc is None and self.in_response and self.ends_at_close and self.status >= 200:
            try:
                exchange.end(time.perf_counter())  # the close is how such a body ends
            except Exception as error:  # RequestFailed: not an event stream, a bad last event
                exchange.fail(error)
            return
        why = f"{type(exc).__name__}: {exc}" if exc else "the server closed the connection"
        if self.in_response:
            exchange.fail(RequestFailed("connection", f"the answer broke off: {why} mid-body"))
        else:
            exchange.fail(RequestFailed("connection", f"{why} before answering"))

    def break_off(self, error: Exception) -> None:
        """Fail the exchange in progress with `error` and close: the connection is not safe to reuse."""
        exchange, self.exchange = self.exchange, None
        if exchange is not None:
            exchange.fail(error)
        self.close()

    def abandon(self) -> None:
        """The caller stopped waiting: on an answered exchange whose body has not ended, keep reading
        to its end (then the connection is reused); on an unanswered one (a limit, a cancel), close."""
        exchange = self.exchange
        if exchange is None:
            return
        exchange.watchdog.stop()
        self.tail_since = time.perf_counter()
        if not exchange.result.done():
            self.exchange = None
            self.close()

    def close(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.close()


class EventStreamPool:
    """Keep-alive connections per host for streamed POSTs; one request per connection at a time."""

    def __init__(self, headers: Iterable[tuple[bytes, bytes]], connect_s: float):
        self.headers = [(name, value) for name, value in headers if name.lower() not in _HEADERS_WE_SET]
        for name, value in self.headers:
            if has_line_break((name + value).decode("latin-1")):
                raise ValueError(f"header {name.decode('latin-1')!r} holds a line break or NUL")
        self.connect_s = connect_s
        self.idle: dict[tuple[str, int], list[_Connection]] = {}
        self.targets: dict[str, tuple[tuple[str, int], bytes]] = {}  # url -> (host, port), request head

    async def post_event_stream(
        self, url: str, body: bytes, on_event: Callable[[Any, float], object], limits: Timeouts
    ) -> bool:
        """POST body (JSON) to url and read the answer's event stream: True when [DONE] arrived.
        A connection kept alive that turns out closed is replaced once, transparently."""
        key, head = self._target(url)
        request = head + b"Content-Length: %d\r\n\r\n" % len(body) + body
        connection = await self._connection(key)
        try:
            return await self._exchange(connection, key, request, on_event, limits, url)
        except RequestFailed as failure:
            if failure.kind != "connection" or not connection.was_reused or connection.answered:
                raise
        fresh = await self._connection(key, reuse=False)
        return await self._exchange(fresh, key, request, on_event, limits, url)

    def _target(self, url: str) -> tuple[tuple[str, int], bytes]:
        """The host and the request head up to Content-Length, built once per URL."""
        known = self.targets.get(url)
        if known is None:
            target = httpx.URL(url)
            headers = self.headers
            basic = basic_auth_header(url)  # userinfo wins over a default Authorization, as in httpx
            if basic is not None:
                headers = [(n, v) for n, v in headers if n.lower() != b"authorization"]
                headers.append((b"Authorization", basic.encode("latin-1")))
            lines = [
                b"POST " + target.raw_path + b" HTTP/1.1",
                b"Host: " + target.netloc,
                b"Content-Type: application/json",
                b"Accept-Encoding: identity",
                *(name + b": " + value for name, value in headers),
            ]
            known = self.targets[url] = ((target.host, target.port or 80), b"\r\n".join(lines) + b"\r\n")
        return known

    async def _exchange(
        self,
        connection: _Connection,
        key: tuple[str, int],
        request: bytes,
        on_event: Callable[[Any, float], object],
        limits: Timeouts,
        url: str = "",
    ) -> bool:
        # the first-token or idle limit passed: fail the request and drop its connection
        exchange = _Exchange(
            on_event, limits, on_expire=lambda: connection.break_off(exchange.watchdog.failure()), url=url
        )
        connection.send(request, exchange)
        try:
            return await exchange.result
        finally:
            connection.abandon()
            if not connection.closed:
                self.idle.setdefault(key, []).append(connection)

    async def _connection(self, key: tuple[str, int], reuse: bool = True) -> _Connection:
        """An idle kept-alive connection to the host, else a new one. A connection still reading the
        tail of an answered stream stays pooled for TAIL_GRACE_S, then is closed; a closed one is dropped."""
        pooled = self.idle.get(key, [])
        now = time.perf_counter()
        for connection in pooled:  # a body that never ends after [DONE] must not hold a socket forever
            if not connection.reusable and now - connection.tail_since > TAIL_GRACE_S:
                connection.close()
        if reuse:
            for connection in pooled:
                if connection.reusable:
                    pooled.remove(connection)
                    connection.was_reused = True
                    return connection
        pooled[:] = [connection for connection in pooled if not connection.closed]
        host, port = key
        try:
            async with asyncio.timeout(self.connect_s):
                _, connection = await asyncio.get_running_loop().create_connection(_Connection, host, port)
        except TimeoutError:
            raise RequestFailed(
                "connection", f"could not connect to {host}:{port} within {self.connect_s:g}s"
            ) from None
        except OSError as err:
            raise RequestFailed(
                "connection", f"could not connect to {host}:{port}: {err.strerror or err}"
            ) from None
        return connection

    def close(self) -> None:
        for connections in self.idle.values():
            for connection in connections:
                connection.close()
        self.idle.clear()
