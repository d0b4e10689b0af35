"""Streamed chat completions against an OpenAI/SGLang-compatible endpoint, timed on the client.

Timing (time.perf_counter, like sglang's bench_serving): TTFT = request sent -> first chunk carrying
generated text (content or reasoning_content: for thinking models the first reasoning token is the end
of prefill); ITL = gaps between successive such chunks; latency = request sent -> stream closed.
Token counts come from the server's usage (stream_options.include_usage); without it, completion
tokens = the number of text chunks.

The stream is read as untrusted bytes: invalid UTF-8 and lone surrogates become U+FFFD; a malformed
event, a body that is not an event stream, a dropped connection, a stall past the idle limit or an
answer past MAX_ANSWER_CHARS each raise RequestFailed (recall_eval.transport) with what arrived so
far as `partial`, never anything else (the stream reader is recall_eval.event_stream). Retries (429/502/503/504, connection) go through
recall_eval.retry.with_retries.

The answer cap counts answer text only: a thinking model may reason for tens of thousands of words
within its budget. Reasoning is kept apart, its first MAX_REASONING_CHARS stored (Completion.reasoning_cut
marks the rest as cut); a server past MAX_REASONING_READ characters of reasoning is cut off.

Servers as they are (each adaptation recorded once per run in recall_eval.adaptations):
- a 4xx that names a field the harness adds on its own (OPTIONAL_FIELDS: stream_options, temperature)
  is retried once without it, and the field stays off for the rest of the run;
- a server that answers a stream request with one JSON body (chat.completion) is read from that body:
  the answer is scored, TTFT and decode speed are not measured (Completion.streamed False);
- a `null` in --extra-body removes that key from the request.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import httpx

from recall_eval import adaptations as adapted
from recall_eval.adaptations import Adaptations
from recall_eval.event_stream import JSON_ANSWER, clean_text, excerpt, read_event_stream
from recall_eval.retry import RetryPolicy, with_retries
from recall_eval.transport import (
    RequestFailed,
    Timeouts,
    classify_error_message,
    transport_failure,
)
from recall_eval.types import ChatMessage, Completion, Endpoint, RequestSettings

__all__ = ["ChatClient", "RequestFailed", "classify_error_message", "split_thinking"]

_T = TypeVar("_T")
_THINK_BLOCK = re.compile(r"<think>(.*?)</think>", re.DOTALL)
MAX_ANSWER_CHARS = 65_536  # answer text (content) per answer; a server past it is cut off
MAX_REASONING_CHARS = 65_536  # reasoning kept per answer (the rest is counted, marked as cut)
MAX_REASONING_READ = 4_194_304  # reasoning read per answer before the server is cut off (~1M tokens)
# fields the harness adds to a request on its own: a server that rejects one gets the request without it
OPTIONAL_FIELDS = ("stream_options", "temperature")


def without_nulls(body: dict[str, Any]) -> dict[str, Any]:
    """The body without the keys whose value is None (a `null` in --extra-body removes a key)."""
    return {key: value for key, value in body.items() if value is not None}


def rejected_field(failure: RequestFailed, body: dict[str, Any]) -> str | None:
    """The optional field a 4xx refusal names, when the request carried it (None: another refusal)."""
    if failure.kind != "rejected" or failure.status is None or not 400 <= failure.status < 500:
        return None
    message = str(failure).lower()
    return next((name for name in OPTIONAL_FIELDS if name in body and name in message), None)


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


@dataclass
class _StreamState:
    content: list[str] = field(default_factory=list)
    reasoning: list[str] = field(default_factory=list)
    chunk_times: list[float] = field(default_factory=list)
    chars: int = 0  # answer text (content) so far
    reasoning_chars: int = 0  # reasoning so far, kept or not
    kept_reasoning: int = 0  # reasoning characters kept (at most MAX_REASONING_CHARS)
    finish_reason: str | None = None
    usage: dict[str, Any] | None = None
    json_answer: bool = False  # one JSON body instead of a stream

    def text_so_far(self) -> str:
        """The answer text so far (a failed case's stored answer: reasoning is never an answer)."""
        return "".join(self.content)

    def keep_reasoning(self, thought: str) -> None:
        self.reasoning_chars += len(thought)
        room = MAX_REASONING_CHARS - self.kept_reasoning
        if room > 0:
            kept = thought[:room]
            self.reasoning.append(kept)
            self.kept_reasoning += len(kept)


def _delta_text(delta: Any, *keys: str) -> str:
    """The first non-empty text field of a delta, storable (lone surrogates as U+FFFD)."""
    if not isinstance(delta, dict):
        return ""
    for key in keys:
        value = delta.get(key)
        if value:
            text = value if isinstance(value, str) else str(value)
            return text if text.isascii() else clean_text(text)
    return ""


def _consume_event(data: Any, state: _StreamState, now: float) -> bool:
    if not isinstance(data, dict):
        raise RequestFailed(
            "protocol", f"stream event is not a JSON object: {excerpt(json.dumps(data), 120)}"
        )
    got_text = False
    if data.get(JSON_ANSWER):  # a whole chat.completion body (event_stream.JSON_ANSWER)
        state.json_answer = True
    for choice in data.get("choices") or ():
        if not isinstance(choice, dict):
            continue
        delta = choice.get("delta") if "delta" in choice else choice.get("message")
        text = _delta_text(delta, "content")
        thought = _delta_text(delta, "reasoning_content", "reasoning")
        if text or thought:
            state.chunk_times.append(now)
            got_text = True
            if text:
                state.content.append(text)
                state.chars += len(text)
            if thought:
                state.keep_reasoning(thought)
        if choice.get("finish_reason"):
            state.finish_reason = str(choice["finish_reason"])
    usage = data.get("usage")
    if isinstance(usage, dict):
        state.usage = usage
    if state.chars > MAX_ANSWER_CHARS:
        raise RequestFailed(
            "protocol",
            f"the answer ran past {MAX_ANSWER_CHARS:,} characters (the server ignored max_tokens?); "
            f"stored the first {MAX_ANSWER_CHARS:,}",
            partial=state.text_so_far()[:MAX_ANSWER_CHARS],
        )
    if state.reasoning_chars > MAX_REASONING_READ:
        raise RequestFailed(
            "protocol",
            f"the reasoning ran past {MAX_REASONING_READ:,} characters (the server ignored max_tokens?); "
            f"stored the first {MAX_REASONING_CHARS:,}",
            partial=state.text_so_far()[:MAX_ANSWER_CHARS],
        )
    return got_text


async def _send_streaming(
    http: httpx.AsyncClient, request: httpx.Request, first_token_s: float
) -> httpx.Response:
    """Send and wait for the response headers, within the first-token limit (a server may hold its
    headers until the first token)."""
    try:
        async with asyncio.timeout(first_token_s):
            return await http.send(request, stream=True)
    except TimeoutError as err:
        raise RequestFailed("timeout", f"no first token within {first_token_s:g}s") from err


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
        timeouts: Timeouts | None = None,
        knobs: RequestSettings | None = None,  # sent in the body: RequestSettings.body_fields()
        adaptations: Adaptations | None = None,
    ):
        self.endpoint = endpoint
        # shared by the run's clients: fields a server rejected stay off for every request of the run
        self.adaptations = adaptations if adaptations is not None else Adaptations()
        self.http = http
        self.timeouts = timeouts or Timeouts.for_total(request_timeout_s)
        self.request_timeout_s = self.timeouts.total_s
        self.retry = RetryPolicy(attempts=retries + 1, backoff_s=backoff_s)
        self.knobs = knobs or RequestSettings()
        self.extra_body = dict(extra_body or {})

    def _body(self, messages: tuple[ChatMessage, ...], max_tokens: int) -> dict[str, Any]:
        body = {
            "model": self.endpoint.model,
            "messages": [message.model_dump() for message in messages],
            "max_tokens": max_tokens,
            "temperature": 0,
            "stream": True,
            "stream_options": {"include_usage": True},
            **self.knobs.body_fields(),
            **self.extra_body,
        }
        for name in OPTIONAL_FIELDS:
            if f"{adapted.DROPPED_FIELD}:{name}" in self.adaptations:
                body.pop(name, None)
        return without_nulls(body)

    def drop_rejected(self, failure: RequestFailed, body: dict[str, Any]) -> bool:
        """After a 4xx naming an optional field the body carried: leave it off from now on (True)."""
        name = rejected_field(failure, body)
        if name is None:
            return False
        status = failure.status
        self.adaptations.note(
            f"{adapted.DROPPED_FIELD}:{name}",
            f"the server rejected `{name}` (HTTP {status}: {excerpt(str(failure), 120)}); requests are sent "
            f"without it" + (" (token counts come from counted chunks)" if name == "stream_options" else ""),
        )
        return True

    async def complete(
        self,
        messages: tuple[ChatMessage, ...],
        max_tokens: int,
        give_up: Callable[[], bool] | None = None,
    ) -> Completion:
        """One completion with retries on transient failures (see recall_eval.retry.with_retries).

        give_up() is asked before each retry: True (e.g. the server process died) stops retrying.
        """
        return await self.with_retries(lambda: self._once(messages, max_tokens), give_up)

    async def with_retries(
        self, once: Callable[[], Awaitable[_T]], give_up: Callable[[], bool] | None = None
    ) -> _T:
        """once() under the total timeout, retried like complete() (also used for /generate)."""
        return await with_retries(once, self.retry, self.timeouts.total_s, give_up)

    async def _once(self, messages: tuple[ChatMessage, ...], max_tokens: int) -> Completion:
        body = self._body(messages, max_tokens)
        try:
            return await self._send(body)
        except RequestFailed as failure:
            if not self.drop_rejected(failure, body):
                raise
        return await self._send(self._body(messages, max_tokens))

    async def _send(self, body: dict[str, Any]) -> Completion:
        url = f"{self.endpoint.base_url.rstrip('/')}/v1/chat/completions"
        state = _StreamState()
        on_event = lambda data, arrived: _consume_event(data, state, arrived)  # noqa: E731
        fast_reader = getattr(self.http, "event_streams_for", None)  # http_client.RunClient
        streams = fast_reader(url) if fast_reader is not None else None
        sent = time.perf_counter()
        try:
            if streams is not None:
                encoded = json.dumps(body, ensure_ascii=False, separators=(",", ":"))
                done = await streams.post_event_stream(url, encoded.encode(), on_event, self.timeouts)
            else:
                done = await self._through_httpx(url, body, on_event)
        except RequestFailed as failure:
            failure.partial = failure.partial or state.text_so_far()
            raise
        except httpx.TransportError as err:
            failure = transport_failure(err, self.endpoint.base_url)
            failure.partial = state.text_so_far()
            raise failure from err
        if state.json_answer:
            self.adaptations.note(
                adapted.JSON_ANSWERS,
                "the server answered stream requests with one JSON body; answers are scored from it, "
                "their time to first token and decode speed are not measured",
            )
        if not done and state.finish_reason is None:
            raise RequestFailed(
                "connection",
                "the stream closed before the answer finished (no finish_reason, no [DONE])",
                partial=state.text_so_far(),
            )
        closed = time.perf_counter()
        return self._completion(state, sent, closed)

    async def _through_httpx(
        self, url: str, body: dict[str, Any], on_event: Callable[[Any, float], object]
    ) -> bool:
        request = self.http.build_request("POST", url, json=body)
        response = await _send_streaming(self.http, request, self.timeouts.first_token_s)
        try:
            return await read_event_stream(response, on_event, self.timeouts)
        finally:
            await response.aclose()

    @staticmethod
    def _completion(state: _StreamState, sent: float, closed: float) -> Completion:
        answer, inline_thoughts = split_thinking(state.text_so_far())
        reasoning = "".join(state.reasoning)
        cut = state.reasoning_chars > state.kept_reasoning
        if inline_thoughts:
            reasoning = f"{reasoning}\n{inline_thoughts}".strip() if reasoning else inline_thoughts
        if len(reasoning) > MAX_REASONING_CHARS:
            reasoning, cut = reasoning[:MAX_REASONING_CHARS], True
        times = [] if state.json_answer else state.chunk_times
        usage = state.usage or {}
        prompt_tokens = usage.get("prompt_tokens")
        completion_tokens = usage.get("completion_tokens", len(state.chunk_times))
        counted = isinstance(usage.get("completion_tokens"), int)
        return Completion(
            text=answer,
            reasoning=reasoning,
            reasoning_cut=cut,
            streamed=not state.json_answer,
            finish_reason=state.finish_reason,
            prompt_tokens=prompt_tokens if isinstance(prompt_tokens, int) else None,
            completion_tokens=completion_tokens
            if isinstance(completion_tokens, int)
            else len(state.chunk_times),
            completion_tokens_source="usage" if counted else "chunks",
            ttft_s=times[0] - sent if times else None,
            itl_s=tuple(later - earlier for earlier, later in zip(times, times[1:], strict=False)),
            latency_s=closed - sent,
        )
