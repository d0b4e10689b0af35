"""Reading a server-sent event stream as untrusted bytes, and the text helpers that make what arrives
storable: invalid UTF-8 and lone surrogates become U+FFFD; a malformed event, a body that is not an event
stream or an error event raise RequestFailed (recall_eval.transport); the first-token / idle limits apply
to the gap since the last network chunk; each event carries the time its bytes arrived.
"""

from __future__ import annotations

import asyncio
import html
import json
import re
import time
from collections.abc import AsyncIterable, AsyncIterator, Callable
from typing import Any, TypeVar
from urllib.parse import urljoin

import httpx

from recall_eval.transport import RequestFailed, Timeouts, classify_error_message, status_failure

_T = TypeVar("_T")
# set on the one event made of a whole JSON answer (a server that ignored stream: true)
JSON_ANSWER = "_recall_eval_json_answer"
MAX_JSON_ANSWER_BYTES = 8 * 1024 * 1024
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")
EXCERPT_CHARS = 200


def clean_text(text: str) -> str:
    """Lone surrogates (a JSON "\\udcff" escape decodes to one) as U+FFFD: storable, printable."""
    return _LONE_SURROGATE.sub("\ufffd", text)


def excerpt(text: str, limit: int = EXCERPT_CHARS) -> str:
    """A short, single-line, storable piece of untrusted text for an error detail."""
    flat = " ".join(clean_text(text).split())
    return flat if len(flat) <= limit else flat[:limit] + "…"


_HTML_HIDDEN = re.compile(r"<(script|style|head)\b.*?</\1\s*>", re.IGNORECASE | re.DOTALL)
_HTML_TITLE = re.compile(r"<title\b[^>]*>(.*?)</title\s*>", re.IGNORECASE | re.DOTALL)
_HTML_TAG = re.compile(r"<[^>]*>")


def first_text_line(text: str) -> str:
    """The first line of text a person would read in an error body: an HTML page's title (else its
    first line of visible text, tags dropped), or the first non-blank line of plain text."""
    if "<" in text and re.search(r"<(!doctype|html|body|head|title|h1|center)\b", text, re.IGNORECASE):
        title = _HTML_TITLE.search(text)
        if title and title.group(1).strip():
            return html.unescape(title.group(1))
        text = html.unescape(_HTML_TAG.sub("\n", _HTML_HIDDEN.sub("\n", text)))
    return next((line for line in text.splitlines() if line.strip()), "")


def error_text(body: bytes) -> str:
    """The message of an error response body (JSON error/message/detail, else the first line of its
    text: an HTML error page's title), one line of at most 300 chars."""
    try:
        data = json.loads(body)
    except ValueError:
        return excerpt(first_text_line(body.decode("utf-8", "replace")), 300) or "no body"
    if isinstance(data, dict):
        error = data.get("error", data)
        if isinstance(error, dict):
            return excerpt(str(error.get("message") or error.get("detail") or error), 300)
        return excerpt(str(data.get("message") or data.get("detail") or error), 300)
    return excerpt(str(data), 300)


def _raise_on_error_event(data: Any) -> None:
    if isinstance(data, dict) and "error" in data:
        error = data["error"] if isinstance(data["error"], dict) else {"message": str(data["error"])}
        message = excerpt(str(error.get("message", error)), 300)
        code = error.get("code")
        status = code if isinstance(code, int) else None
        raise RequestFailed(classify_error_message(message, status), message, status)


def is_json_answer(status: int, content_type: str | bytes | None) -> bool:
    """A 2xx answer declared as JSON: the server answered the stream request with one body."""
    if isinstance(content_type, bytes):
        content_type = content_type.decode("latin-1")
    media = (content_type or "").split(";")[0].strip().lower()
    return 200 <= status < 300 and (media == "application/json" or media.endswith("+json"))


def json_answer_event(body: bytes) -> dict[str, Any]:
    """A whole chat.completion body as the one event the stream consumer reads (choices[].message
    instead of .delta, marked JSON_ANSWER); RequestFailed when it is not one."""
    if len(body) > MAX_JSON_ANSWER_BYTES:
        raise RequestFailed("protocol", f"the JSON answer is over {MAX_JSON_ANSWER_BYTES:,} bytes")
    try:
        data = json.loads(body)
    except ValueError as err:
        text = body.decode("utf-8", "replace")
        raise RequestFailed(
            "protocol", f"the answer is neither an event stream nor JSON: {excerpt(text)}"
        ) from err
    _raise_on_error_event(data)
    if not isinstance(data, dict) or not isinstance(data.get("choices"), list):
        raise RequestFailed("protocol", f"the JSON answer holds no choices: {excerpt(json.dumps(data), 120)}")
    return {**data, JSON_ANSWER: True}


def redirect_failure(status: int, location: str | None, url: str = "") -> RequestFailed:
    """A 3xx to a POST: not followed (a request body is not re-sent blindly); named (the location
    resolved against the request's URL), not retried."""
    where = f" to {urljoin(url, location)}" if location else ""
    return RequestFailed(
        "rejected",
        f"HTTP {status}: the server redirects the request{where}; give that URL as --base-url",
        status,
    )


class GapWatchdog:
    """The first-token / idle limit on the gap since the last network chunk, with one timer per limit
    period instead of one per chunk: a chunk only notes its arrival time (time.perf_counter, as taken
    by the reader); when the timer fires it re-arms at last chunk + limit, or, if that has passed,
    calls on_expire() once (which ends the read)."""

    def __init__(self, on_expire: Callable[[], None], limits: Timeouts):
        self.loop = asyncio.get_running_loop()
        self.on_expire, self.limits = on_expire, limits
        self.flowing = False
        self.last = time.perf_counter()
        self.expired_limit: float | None = None
        self.handle: asyncio.TimerHandle | None = None
        self._arm()

    @property
    def limit(self) -> float:
        return self.limits.idle_s if self.flowing else self.limits.first_token_s

    def _arm(self) -> None:
        if self.limit != float("inf"):
            delay = max(0.0, self.last + self.limit - time.perf_counter())
            self.handle = self.loop.call_later(delay, self._check)

    def chunk(self, arrived: float) -> None:
        self.last = arrived

    def start_flowing(self) -> None:
        if not self.flowing:
            self.flowing = True
            if self.handle is not None:
                self.handle.cancel()
            self._arm()

    def _check(self) -> None:
        if time.perf_counter() < self.last + self.limit:
            self._arm()
            return
        self.expired_limit = self.limit
        self.on_expire()

    def failure(self) -> RequestFailed:
        waiting_for = "data" if self.flowing else "first token"
        return RequestFailed("timeout", f"no {waiting_for} within {self.expired_limit:g}s")

    def stop(self) -> None:
        if self.handle is not None:
            self.handle.cancel()


class EventStreamParser:
    """Server-sent events from network chunks, fed as they arrive (from an httpx response or straight
    from a socket, recall_eval.stream_connection): each decoded `data:` event goes to
    on_event(data, arrived) with the arrival time of the chunk that completed it.

    Lines are split as bytes and each event's JSON decoded from its bytes (one decode, no text
    buffer); an event that is not valid UTF-8 is decoded with U+FFFD in place of the bad bytes.
    on_event returning a truthy value marks generated text (`text_started`); `done` is set at [DONE],
    after which further bytes are ignored. A malformed event or an error event raises RequestFailed
    from feed(); finish() (at the end of the body) raises one when the body was not an event stream.
    """

    def __init__(self, on_event: Callable[[Any, float], object]):
        self.on_event = on_event
        self.buffer = b""
        self.seen_events = 0
        self.other_text = ""
        self.done = self.text_started = False

    def feed(self, raw: bytes, arrived: float) -> None:
        if self.done:
            return
        lines = (self.buffer + raw if self.buffer else raw).split(b"\n")
        self.buffer = lines.pop()
        self._lines(lines, arrived)

    def finish(self, arrived: float) -> bool:
        """The body ended: parse what is left; True when [DONE] arrived."""
        if not self.done:
            rest, self.buffer = self.buffer, b""
            self._lines(rest.split(b"\n"), arrived)
        if not self.done and not self.seen_events and self.other_text:
            raise RequestFailed("protocol", f"the answer is not an event stream: {excerpt(self.other_text)}")
        return self.done

    def _lines(self, lines: list[bytes], arrived: float) -> None:
        for line in lines:
            if not line.startswith(b"data:"):
                self._other_line(line)
                continue
            payload = line[5:].strip()
            if payload == b"[DONE]":
                self.done = True
                return
            if not payload:
                continue
            self.seen_events += 1
            data = _event_data(payload)
            _raise_on_error_event(data)
            if self.on_event(data, arrived):
                self.text_started = True

    def _other_line(self, line: bytes) -> None:
        """Comments and SSE fields are fine; anything else is kept (a little) to say what came instead."""
        line = line.rstrip(b"\r")
        if line.strip() and not line.startswith((b":", b"event:", b"id:", b"retry:")):
            if len(self.other_text) < 4 * EXCERPT_CHARS:
                self.other_text += line[:EXCERPT_CHARS].decode("utf-8", "replace") + " "


_DECODER = json.JSONDecoder()


def _event_data(payload: bytes) -> Any:
    """One event's JSON value (payload has no surrounding whitespace); RequestFailed if it is not one."""
    try:
        text = payload.decode()
    except UnicodeDecodeError:
        text = payload.decode("utf-8", "replace")
    try:
        data, end = _DECODER.raw_decode(text)  # json.loads without its encoding sniffing
    except ValueError as err:
        raise RequestFailed("protocol", f"malformed stream event: {excerpt(text, 120)}") from err
    if end != len(text):
        raise RequestFailed("protocol", f"malformed stream event: {excerpt(text, 120)}")
    return data


def feed_chunk(parser: EventStreamParser, watchdog: GapWatchdog, raw: bytes, arrived: float) -> None:
    """One network chunk, from either reader: note its time for the gap limits, parse it, and once
    generated text flows switch the watchdog from the first-token limit to the idle limit."""
    watchdog.chunk(arrived)
    parser.feed(raw, arrived)
    if parser.text_started:
        watchdog.start_flowing()


def _raw_chunks(response: httpx.Response) -> AsyncIterator[bytes]:
    """The body's network chunks. Without a content encoding, the transport's stream itself: the
    same bytes as aiter_bytes() (transport errors still arrive as httpx.TransportError) with four
    fewer generator layers per chunk."""
    if response.headers.get("content-encoding", "identity").strip().lower() in ("", "identity"):
        stream = response.stream
        if isinstance(stream, AsyncIterable):
            return aiter(stream)
    return response.aiter_bytes()


async def read_event_stream(
    response: httpx.Response,
    on_event: Callable[[Any, float], object],
    timeouts: Timeouts | None = None,
) -> bool:
    """Read a streamed (SSE) httpx response with an EventStreamParser, until [DONE] or the end of the
    body. `arrived` is the perf_counter time a chunk came off the transport (taken before parsing),
    so events parsed later, or after a busy moment, keep their true arrival times.

    Returns True when [DONE] arrived. Once on_event has returned a truthy value (generated text) the
    idle limit (gap between chunks) applies instead of the first-token limit. An HTTP error status,
    a malformed event, a body that is not an event stream or an error event raises RequestFailed;
    a transport error (dropped connection) propagates as httpx.TransportError.
    """
    limits = timeouts or Timeouts(first_token_s=float("inf"), idle_s=float("inf"))
    if response.status_code >= 400:
        message = error_text(await response.aread())
        raise status_failure(response.status_code, message, response.headers.get("retry-after"))
    if 300 <= response.status_code < 400:
        raise redirect_failure(response.status_code, response.headers.get("location"), str(response.url))
    if is_json_answer(response.status_code, response.headers.get("content-type")):
        on_event(json_answer_event(await response.aread()), time.perf_counter())
        return True
    parser = EventStreamParser(on_event)
    chunks = _raw_chunks(response)
    try:
        async with asyncio.timeout(None) as scope:
            loop = asyncio.get_running_loop()
            watchdog = GapWatchdog(lambda: scope.reschedule(loop.time()), limits)
            try:
                return await _read_events(chunks, parser, watchdog)
            finally:
                watchdog.stop()
    except TimeoutError as err:
        if watchdog.expired_limit is None:
            raise
        raise watchdog.failure() from err


async def _read_events(
    chunks: AsyncIterator[bytes], parser: EventStreamParser, watchdog: GapWatchdog
) -> bool:
    async for raw in chunks:
        feed_chunk(parser, watchdog, raw, time.perf_counter())
        if parser.done:
            return True
    return parser.finish(time.perf_counter())
