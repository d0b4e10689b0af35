"""Streamed chat requests parsed where their bytes arrive: HTTP/1.1 (h11) over asyncio protocols.

Why not httpx here: reading an event stream through httpx wakes a task and walks httpx, httpcore
and anyio for every network chunk (~23 per 32-token answer), which costs 2-3 times the CPU of the
whole rest of the harness (`python -m tests.benchmarks.bench_harness --floor`). Here each chunk is
parsed inside the protocol's data_received callback, stamped with the time it came off the socket,
and one future per request wakes the caller at [DONE]. h11 (the HTTP/1.1 library httpcore uses)
does the HTTP; this module only moves bytes.

Used by ChatClient for http:// servers when no proxy is configured (RunClient.event_streams);
https, a proxy, or RECALL_EVAL_HTTP=httpx keep the httpx path, and every other request (probes,
tokenize, /generate) always goes through httpx. Errors are the same RequestFailed kinds as the httpx
path: an error status via transport.status_failure, a dropped connection as `connection`, a stall
as `timeout` (event_stream.GapWatchdog), a bad stream as `protocol` (event_stream.EventStreamParser).
"""

from __future__ import annotations

import asyncio
import os
import time
import urllib.request
import zlib
from collections.abc import Callable, Iterable
from typing import Any

import h11
import httpx

from recall_eval.event_stream import EventStreamParser, GapWatchdog, error_text, feed_chunk
from recall_eval.transport import RequestFailed, Timeouts, status_failure

HTTP_ENV = "RECALL_EVAL_HTTP"  # "httpx": every request through httpx (a fallback, and for comparison)
MAX_ERROR_BODY = 65_536  # bytes of an error answer kept for its message
_HEADERS_WE_SET = frozenset({b"host", b"content-length", b"content-type", b"accept-encoding", b"connection"})


def stream_connections_enabled() -> bool:
    """Off when RECALL_EVAL_HTTP=httpx or when a proxy is configured (httpx honours proxies)."""
    if os.environ.get(HTTP_ENV, "").strip().lower() == "httpx":
        return False
    proxies = urllib.request.getproxies()
    return not any(proxies.get(scheme) for scheme in ("http", "all"))


class _Exchange:
    """One request's response as it arrives: status, then an event stream (or an error body)."""

    def __init__(
        self, on_event: Callable[[Any, float], object], limits: Timeouts, on_expire: Callable[[], None]
    ):
        self.result: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        self.parser = EventStreamParser(on_event)
        self.watchdog = GapWatchdog(on_expire, limits)
        self.status = 0
        self.headers: dict[bytes, bytes] = {}
        self.error_body = bytearray()
        self.inflate: Any = None  # a zlib decompressor when the server compressed the stream anyway

    def response(self, event: h11.Response) -> None:
        self.status = event.status_code
        self.headers = {name.lower(): value for name, value in event.headers}
        encoding = self.headers.get(b"content-encoding", b"identity").strip().lower()
        if encoding in (b"gzip", b"x-gzip"):
            self.inflate = zlib.decompressobj(16 + zlib.MAX_WBITS)
        elif encoding == b"deflate":
            self.inflate = zlib.decompressobj()
        elif encoding not in (b"", b"identity"):
            raise RequestFailed(
                "protocol",
                f"the stream is compressed with {encoding.decode()!r}; set {HTTP_ENV}=httpx to decode it",
            )

    def data(self, chunk: bytes, arrived: float) -> None:
        if self.inflate is not None:
            chunk = self.inflate.decompress(chunk)
        if self.status >= 400:
            self.error_body += chunk[: MAX_ERROR_BODY - len(self.error_body)]
            return
        feed_chunk(self.parser, self.watchdog, chunk, arrived)
        if self.parser.done:
            self.finish(True)

    def end(self, arrived: float) -> None:
        if self.status >= 400:
            retry_after = self.headers.get(b"retry-after")
            message = error_text(bytes(self.error_body))
            self.fail(
                status_failure(self.status, message, retry_after.decode("latin-1") if retry_after else None)
            )
        else:
            self.finish(self.parser.finish(arrived))

    def finish(self, done: bool) -> None:
        self.watchdog.stop()
        if not self.result.done():
            self.result.set_result(done)

    def fail(self, error: BaseException) -> None:
        self.watchdog.stop()
        if not self.result.done():
            self.result.set_exception(error)


class _Connection(asyncio.Protocol):
    """One keep-alive HTTP/1.1 connection; at most one exchange at a time."""

    def __init__(self) -> None:
        self.http = h11.Connection(h11.CLIENT)
        self.transport: asyncio.Transport | None = None
        self.exchange: _Exchange | None = None
        self.closed = False
        self.answered = False  # the current request got response bytes (a stale connection gets none)
        self.was_reused = False  # taken from the pool (may have been closed by the server meanwhile)

    @property
    def reusable(self) -> bool:
        return not self.closed and self.exchange is None and self.http.our_state is h11.IDLE

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def send(self, request: h11.Request, body: bytes, exchange: _Exchange) -> None:
        self.exchange, self.answered = exchange, False
        assert self.transport is not None
        self.transport.write(
            self.http.send(request) + self.http.send(h11.Data(data=body)) + self.http.send(h11.EndOfMessage())
        )

    def data_received(self, data: bytes) -> None:
        arrived = time.perf_counter()
        if self.exchange is None:  # bytes nobody asked for: the connection is not safe to reuse
            self.close()
            return
        self.answered = True
        self.http.receive_data(data)
        self._handle_events(arrived)

    def eof_received(self) -> bool:
        self.http.receive_data(b"")
        self._handle_events(time.perf_counter())
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if self.exchange is not None:
            why = f"{type(exc).__name__}: {exc}" if exc else "the server closed the connection"
            self.exchange.fail(RequestFailed("connection", f"{why} before the answer ended"))
            self.exchange = None

    def _handle_events(self, arrived: float) -> None:
        exchange = self.exchange
        try:
            while exchange is not None:
                event = self.http.next_event()
                if event is h11.NEED_DATA or event is h11.PAUSED:
                    return
                if isinstance(event, h11.Response):
                    exchange.response(event)
                elif isinstance(event, h11.Data):
                    exchange.data(bytes(event.data), arrived)
                elif isinstance(event, h11.EndOfMessage):
                    exchange.end(arrived)
                    self._exchange_over()
                    return
                elif isinstance(event, h11.ConnectionClosed):
                    raise RequestFailed(
                        "connection", "the server closed the connection before the answer ended"
                    )
        except h11.RemoteProtocolError as err:
            exchange.fail(RequestFailed("connection", f"the answer broke off: {err}"))
            self.close()
        except Exception as error:  # RequestFailed: a bad stream, an oversized answer, an error event
            exchange.fail(error)
            self.close()

    def _exchange_over(self) -> None:
        self.exchange = None
        if self.http.our_state is h11.DONE and self.http.their_state is h11.DONE:
            self.http.start_next_cycle()
        else:
            self.close()

    def abandon(self) -> None:
        """The caller stopped waiting: on an answered exchange whose body has not ended, keep reading
        to its end (then the connection is reused); on an unanswered one (a limit, a cancel), close."""
        exchange = self.exchange
        if exchange is None:
            return
        exchange.watchdog.stop()
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
        self.connect_s = connect_s
        self.idle: dict[tuple[str, int], list[_Connection]] = {}

    async def post_event_stream(
        self, url: str, body: bytes, on_event: Callable[[Any, float], object], limits: Timeouts
    ) -> bool:
        """POST body (JSON) to url and read the answer's event stream: True when [DONE] arrived.
        A connection kept alive that turns out closed is replaced once, transparently."""
        target = httpx.URL(url)
        connection = await self._connection(target)
        try:
            return await self._exchange(connection, target, body, on_event, limits)
        except RequestFailed as failure:
            if failure.kind != "connection" or not connection.was_reused or connection.answered:
                raise
        return await self._exchange(
            await self._connection(target, reuse=False), target, body, on_event, limits
        )

    async def _exchange(
        self,
        connection: _Connection,
        target: httpx.URL,
        body: bytes,
        on_event: Callable[[Any, float], object],
        limits: Timeouts,
    ) -> bool:
        exchange = _Exchange(on_event, limits, on_expire=lambda: _expired(connection, exchange))
        request = h11.Request(
            method="POST", target=target.raw_path, headers=self._request_headers(target, body)
        )
        connection.send(request, body, exchange)
        try:
            return await exchange.result
        finally:
            connection.abandon()
            if not connection.closed:
                self.idle.setdefault(_key(target), []).append(connection)

    def _request_headers(self, target: httpx.URL, body: bytes) -> list[tuple[bytes, bytes]]:
        return [
            (b"Host", target.netloc),
            (b"Content-Type", b"application/json"),
            (b"Content-Length", str(len(body)).encode()),
            (b"Accept-Encoding", b"identity"),
            *self.headers,
        ]

    async def _connection(self, target: httpx.URL, reuse: bool = True) -> _Connection:
        """An idle kept-alive connection to the target's host, else a new one. A connection still
        reading the tail of an answered stream stays pooled; a closed one is dropped."""
        pooled = self.idle.get(_key(target), [])
        if reuse:
            for connection in pooled:
                if connection.reusable:
                    pooled.remove(connection)
                    connection.was_reused = True
                    return connection
        pooled[:] = [connection for connection in pooled if not connection.closed]
        host, port = _key(target)
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


def _expired(connection: _Connection, exchange: _Exchange) -> None:
    """The first-token or idle limit passed: fail the request and drop its connection."""
    exchange.fail(exchange.watchdog.failure())
    connection.exchange = None
    connection.close()


def _key(target: httpx.URL) -> tuple[str, int]:
    return target.host, target.port or 80
