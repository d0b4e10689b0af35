"""Streamed chat completions against an OpenAI/SGLang-compatible endpoint, timed on the client.

Timing (time.perf_counter, like sglang's bench_serving): TTFT = request sent -> first chunk carrying
generated text (content or reasoning_content: for thinking models the first reasoning token is the end
of prefill); ITL = gaps between successive such chunks; latency = request sent -> stream closed.
Token counts come from the server's usage (stream_options.include_usage); without it, completion
tokens = the number of text chunks.

Failures are raised as RequestFailed with a kind the runner turns into an outcome:
  too_long    a 4xx answer (status, or an error event's code) saying the prompt exceeds the context length
  rejected    another 4xx: not retried
  server      5xx or an error event with a 5xx code, after bounded retries with backoff
  connection  could not connect / connection dropped, after bounded retries with backoff
  timeout     the whole request exceeded the per-request timeout: not retried
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar

import httpx

from recall_eval.types import ChatMessage, Completion, Endpoint

_T = TypeVar("_T")
FailureKind = Literal["too_long", "rejected", "server", "connection", "timeout"]
# Said with a 4xx only: a 5xx that mentions a context length is a server failure, not a verdict on the prompt.
_TOO_LONG = re.compile(
    r"longer than the model's context length|exceeds the model's (maximum )?context length"
    r"|maximum context length is|context_length_exceeded|exceeds the maximum allowed length",
    re.IGNORECASE,
)
_THINK_BLOCK = re.compile(r"<think>(.*?)</think>", re.DOTALL)


class RequestFailed(Exception):
    def __init__(self, kind: FailureKind, message: str, status: int | None = None, attempts: int = 1):
        super().__init__(message)
        self.kind = kind
        self.status = status
        self.attempts = attempts


def split_thinking(content: str) -> tuple[str, str]:
    """Split content into (answer, thinking): every <think>...</think> block is thinking.

    An unclosed <think> makes the rest thinking (the budget ran out mid-thought). A </think> with no
    opening tag (templates that open the thought in the prompt) makes everything before it thinking.
    """
    thoughts = [match.group(1) for match in _THINK_BLOCK.finditer(content)]
    answer = _THINK_BLOCK.sub("", content)
    if "</think>" in answer:
        before, _, answer = answer.partition("</think>")
        thoughts.insert(0, before)
    if "<think>" in answer:
        answer, _, rest = answer.partition("<think>")
        thoughts.append(rest)
    return answer.strip(), "\n".join(thought.strip() for thought in thoughts if thought.strip())


def classify_error_message(message: str, status: int | None) -> FailureKind:
    if status is not None and 400 <= status < 500 and _TOO_LONG.search(message):
        return "too_long"
    if status is not None and status >= 500:
        return "server"
    return "rejected"


@dataclass
class _StreamState:
    content: list[str] = field(default_factory=list)
    reasoning: list[str] = field(default_factory=list)
    chunk_times: list[float] = field(default_factory=list)
    finish_reason: str | None = None
    usage: dict[str, Any] | None = None


def error_text(body: bytes) -> str:
    """The message of an error response body (JSON error/message/detail, else the text), at most 300 chars."""
    try:
        data = json.loads(body)
    except ValueError:
        return body.decode("utf-8", "replace").strip()[:300] or "no body"
    if isinstance(data, dict):
        error = data.get("error", data)
        if isinstance(error, dict):
            return str(error.get("message") or error.get("detail") or error)[:300]
        return str(data.get("message") or data.get("detail") or error)[:300]
    return str(data)[:300]


def _raise_on_error_event(data: Any) -> None:
    if "error" in data:
        error = data["error"] if isinstance(data["error"], dict) else {"message": str(data["error"])}
        message = str(error.get("message", error))
        code = error.get("code")
        status = code if isinstance(code, int) else None
        raise RequestFailed(classify_error_message(message, status), message, status)


async def read_event_stream(response: httpx.Response, on_event: Callable[[Any, float], None]) -> None:
    """Read a streamed (SSE) response: each decoded `data:` event goes to on_event(data, arrived), until
    [DONE]. `arrived` is the perf_counter time its bytes came off the socket (taken per network chunk,
    before any parsing), so events parsed later, or after a busy moment, keep their true arrival times.

    An HTTP error status, a malformed event or an error event raises RequestFailed.
    """
    if response.status_code >= 400:
        message = error_text(await response.aread())
        kind = classify_error_message(message, response.status_code)
        raise RequestFailed(kind, f"HTTP {response.status_code}: {message}", response.status_code)
    pending = ""
    async for text in response.aiter_text():
        arrived = time.perf_counter()
        lines = (pending + text).split("\n")
        pending = lines.pop()  # an unfinished line waits for the next chunk
        for line in lines:
            if _read_line(line.rstrip("\r"), arrived, on_event):
                return
    if pending:
        _read_line(pending.rstrip("\r"), time.perf_counter(), on_event)


def _read_line(line: str, arrived: float, on_event: Callable[[Any, float], None]) -> bool:
    """One SSE line; True at [DONE]."""
    if not line.startswith("data:"):
        return False
    payload = line[5:].strip()
    if payload == "[DONE]":
        return True
    if not payload:
        return False
    try:
        data = json.loads(payload)
    except ValueError as err:
        raise RequestFailed("server", f"malformed stream event: {payload[:120]}") from err
    _raise_on_error_event(data)
    on_event(data, arrived)
    return False


def _consume_event(data: Any, state: _StreamState, now: float) -> None:
    for choice in data.get("choices") or []:
        delta = choice.get("delta") or {}
        text, thought = delta.get("content") or "", delta.get("reasoning_content") or ""
        if text or thought:
            state.chunk_times.append(now)
        if text:
            state.content.append(text)
        if thought:
            state.reasoning.append(thought)
        if choice.get("finish_reason"):
            state.finish_reason = choice["finish_reason"]
    if data.get("usage"):
        state.usage = data["usage"]


class ChatClient:
    """Sends one chat request at a time per call; share one instance (and its httpx client) per run."""

    def __init__(
        self,
        endpoint: Endpoint,
        http: httpx.AsyncClient,
        request_timeout_s: float,
        retries: int = 3,
        backoff_s: float = 0.5,
        extra_body: dict[str, Any] | None = None,
    ):
        self.endpoint = endpoint
        self.http = http
        self.request_timeout_s = request_timeout_s
        self.retries = retries
        self.backoff_s = backoff_s
        self.extra_body = dict(extra_body or {})

    def _body(self, messages: tuple[ChatMessage, ...], max_tokens: int) -> dict[str, Any]:
        return {
            "model": self.endpoint.model,
            "messages": [message.model_dump() for message in messages],
            "max_tokens": max_tokens,
            "temperature": 0,
            "stream": True,
            "stream_options": {"include_usage": True},
            **self.extra_body,
        }

    async def complete(
        self,
        messages: tuple[ChatMessage, ...],
        max_tokens: int,
        give_up: Callable[[], bool] | None = None,
    ) -> Completion:
        """One completion with retries on connection errors and 5xx.

        give_up() is asked before each retry: True (e.g. the server process died) stops retrying.
        """
        return await self.with_retries(lambda: self._once(messages, max_tokens), give_up)

    async def with_retries(
        self, once: Callable[[], Awaitable[_T]], give_up: Callable[[], bool] | None = None
    ) -> _T:
        """once() under the per-request timeout, retried like complete() (also used for /generate)."""
        attempt = 0
        while True:
            attempt += 1
            try:
                async with asyncio.timeout(self.request_timeout_s):
                    return await once()
            except TimeoutError as err:
                raise RequestFailed(
                    "timeout", f"no complete answer within {self.request_timeout_s:g}s", attempts=attempt
                ) from err
            except RequestFailed as err:
                err.attempts = attempt
                if err.kind not in ("server", "connection") or attempt > self.retries:
                    raise
                if give_up is not None and give_up():
                    raise
            except (httpx.TransportError, httpx.RemoteProtocolError) as err:
                failure = RequestFailed(
                    "connection", f"{type(err).__name__}: {err}".strip(), attempts=attempt
                )
                if attempt > self.retries or (give_up is not None and give_up()):
                    raise failure from err
            await asyncio.sleep(self.backoff_s * 2 ** (attempt - 1))

    async def _once(self, messages: tuple[ChatMessage, ...], max_tokens: int) -> Completion:
        url = f"{self.endpoint.base_url.rstrip('/')}/v1/chat/completions"
        state = _StreamState()
        sent = time.perf_counter()
        async with self.http.stream("POST", url, json=self._body(messages, max_tokens)) as response:
            await read_event_stream(response, lambda data, arrived: _consume_event(data, state, arrived))
        closed = time.perf_counter()
        return self._completion(state, sent, closed)

    @staticmethod
    def _completion(state: _StreamState, sent: float, closed: float) -> Completion:
        answer, inline_thoughts = split_thinking("".join(state.content))
        reasoning = "".join(state.reasoning)
        if inline_thoughts:
            reasoning = f"{reasoning}\n{inline_thoughts}".strip() if reasoning else inline_thoughts
        times = state.chunk_times
        usage = state.usage or {}
        return Completion(
            text=answer,
            reasoning=reasoning,
            finish_reason=state.finish_reason,
            prompt_tokens=usage.get("prompt_tokens"),
            completion_tokens=usage.get("completion_tokens", len(times)),
            ttft_s=times[0] - sent if times else None,
            itl_s=tuple(later - earlier for earlier, later in zip(times, times[1:], strict=False)),
            latency_s=closed - sent,
        )
