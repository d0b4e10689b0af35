"""SGLang's native POST /generate with return_indexer_topk, for runs with --capture-indexer.

/generate takes raw text or input_ids, not messages, so each case is first tokenized exactly as a chat
completion would be (POST /v1/tokenize with the messages: chat template and generation prompt
included; the same ids calibration measured the needle in), then sent as
``{"input_ids": ..., "sampling_params": {"max_new_tokens": N, "temperature": 0},
"return_indexer_topk": true, "stream": true}``. The stream is SGLang's default: every chunk carries
the text and output_ids so far (``--incremental-streaming-output`` deltas are handled too); the last
one carries meta_info (finish_reason, prompt/completion tokens, indexer_topk). Streaming gives TTFT
and inter-token gaps, timed from the /generate request (the tokenize round trip is not included),
and per chunk the (output tokens, characters) marks that place the answer on output tokens. The gap
ending with the chunk that carries indexer_topk is left out of the inter-token gaps: it holds the
server's capture work (gathering and encoding every selection), not decoding; latency keeps it.

Failures are RequestFailed with the kinds of recall_eval.chat_client, retried the same way.
"""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import numpy as np

from recall_eval.chat_client import ChatClient, split_thinking
from recall_eval.errors import UserError
from recall_eval.event_stream import clean_text, error_text, read_event_stream
from recall_eval.indexer_coverage import (
    IndexerDataError,
    IndexerLayout,
    answer_tokens,
    decode_indexer_topk,
    indexer_coverage,
    with_cause,
)
from recall_eval.indexer_layout import resolve_layout
from recall_eval.transport import RequestFailed, status_failure
from recall_eval.types import Case, ChatMessage, Completion, IndexerCoverage, Outcome

PROBE_MESSAGES = (ChatMessage(role="user", content="Hi"),)


@dataclass(frozen=True)
class Generation:
    """One /generate answer: the completion plus what coverage needs."""

    completion: Completion
    raw_text: str  # generated text as returned (thinking included)
    prompt_tokens: int  # len(input_ids) sent
    output_tokens: int  # len(output_ids) returned
    marks: tuple[tuple[int, int], ...]  # per chunk: (output tokens so far, characters so far)
    indexer_topk: str | None  # meta_info.indexer_topk (base64 int32), None if the server sent none


@dataclass
class _Stream:
    ids: list[int] = field(default_factory=list)
    text: str = ""
    marks: list[tuple[int, int]] = field(default_factory=list)
    token_times: list[float] = field(default_factory=list)
    meta: dict[str, Any] = field(default_factory=dict)
    # the chunk carrying meta_info.indexer_topk also brought tokens: its gap holds the server's capture work
    capture_in_last_gap: bool = False

    def add(self, chunk: dict[str, Any], now: float) -> bool:
        meta = chunk.get("meta_info") if isinstance(chunk.get("meta_info"), dict) else {}
        ids = [int(i) for i in chunk.get("output_ids") or []]
        text = clean_text(chunk["text"]) if isinstance(chunk.get("text"), str) else ""
        count = meta.get("completion_tokens")
        # meta_info.completion_tokens counts every token so far: more than the chunk holds means deltas
        delta = count > len(ids) if isinstance(count, int) else ids[: len(self.ids)] != self.ids
        before = len(self.ids)
        if delta:
            self.ids.extend(ids)
            self.text += text
        else:
            self.ids = ids
            self.text = text or self.text
        grew = len(self.ids) > before
        if grew:
            self.token_times.append(now)
            self.capture_in_last_gap = "indexer_topk" in meta
        self.marks.append((len(self.ids), len(self.text)))
        if meta:
            self.meta = meta
        return grew


def _finish_reason(meta: dict[str, Any]) -> str | None:
    reason = meta.get("finish_reason")
    if isinstance(reason, dict):
        return reason.get("type")
    return reason if isinstance(reason, str) else None


class GenerateClient:
    """/v1/tokenize + streamed /generate, with the retries and timeout of a ChatClient."""

    def __init__(self, chat: ChatClient):
        self.chat = chat
        self.root = chat.endpoint.base_url.rstrip("/")

    async def generate(
        self,
        messages: tuple[ChatMessage, ...],
        max_tokens: int,
        give_up: Callable[[], bool] | None = None,
    ) -> Generation:
        return await self.chat.with_retries(lambda: self._once(messages, max_tokens), give_up)

    async def _post_json(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        response = await self.chat.http.post(f"{self.root}{path}", json=body)
        if response.status_code >= 400:
            failure = status_failure(
                response.status_code, error_text(response.content), response.headers.get("retry-after")
            )
            failure.args = (f"{path}: {failure}",)
            raise failure
        return response.json()

    async def _once(self, messages: tuple[ChatMessage, ...], max_tokens: int) -> Generation:
        body = {"model": self.chat.endpoint.model, "messages": [m.model_dump() for m in messages]}
        input_ids = [int(t) for t in (await self._post_json("/v1/tokenize", body))["tokens"]]
        request = {
            "input_ids": input_ids,
            "sampling_params": {"max_new_tokens": max_tokens, "temperature": 0},
            "return_indexer_topk": True,
            "stream": True,
        }
        stream = _Stream()
        sent = time.perf_counter()
        async with self.chat.http.stream("POST", f"{self.root}/generate", json=request) as response:
            await read_event_stream(response, stream.add, self.chat.timeouts)
        closed = time.perf_counter()
        return self._generation(stream, len(input_ids), sent, closed)

    @staticmethod
    def _generation(stream: _Stream, prompt_tokens: int, sent: float, closed: float) -> Generation:
        meta = stream.meta
        answer, reasoning = split_thinking(stream.text)
        times = stream.token_times
        # decode speed without the capture's time: the gap that ends with the chunk carrying the captured
        # selections holds the server's work of gathering and encoding them (seconds at 4K), not decoding
        gap_times = times[:-1] if stream.capture_in_last_gap and len(times) > 2 else times
        completion = Completion(
            text=answer,
            reasoning=reasoning,
            finish_reason=_finish_reason(meta),
            prompt_tokens=meta.get("prompt_tokens", prompt_tokens),
            completion_tokens=meta.get("completion_tokens", len(stream.ids)),
            ttft_s=times[0] - sent if times else None,
            itl_s=tuple(later - earlier for earlier, later in zip(gap_times, gap_times[1:], strict=False)),
            latency_s=closed - sent,
        )
        topk = meta.get("indexer_topk")
        return Generation(
            completion=completion,
            raw_text=stream.text,
            prompt_tokens=prompt_tokens,
            output_tokens=len(stream.ids),
            marks=tuple(stream.marks),
            indexer_topk=topk if isinstance(topk, str) else None,
        )


class IndexerCapture:
    """What the runner uses when a run captures the indexer: generate, then per-layer coverage."""

    def __init__(self, client: GenerateClient, layout: IndexerLayout):
        self.client = client
        self.layout = layout

    async def complete(
        self, case: Case, max_tokens: int, give_up: Callable[[], bool] | None = None
    ) -> Generation:
        return await self.client.generate(case.messages, max_tokens, give_up)

    def coverage(self, case: Case, generation: Generation, outcome: Outcome) -> IndexerCoverage | None:
        """Coverage with its cause; None for a case with no measured needle (nothing to look for)."""
        if case.needle_token_offset is None or case.needle_token_end is None:
            return None
        if generation.indexer_topk is None:
            raise IndexerDataError(
                "the server answered without meta_info.indexer_topk; start it with --enable-return-indexer-topk"
            )
        topk = decode_indexer_topk(generation.indexer_topk, self.layout)
        answer = answer_tokens(
            generation.raw_text, generation.marks, case.expected, generation.output_tokens, outcome == "pass"
        )
        needle = (case.needle_token_offset, case.needle_token_end)
        return with_cause(
            indexer_coverage(topk, self.layout, generation.prompt_tokens, answer, needle), outcome
        )


def _local_model_config(model_path: str | None) -> dict[str, Any] | None:
    """config.json of a local model directory (a hub id or a missing path gives None)."""
    if not model_path:
        return None
    path = Path(model_path) / "config.json"
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


async def _model_info(chat: ChatClient) -> dict[str, Any]:
    try:
        response = await chat.http.get(f"{chat.endpoint.base_url.rstrip('/')}/model_info", timeout=10)
        data = response.json() if response.status_code == 200 else {}
    except (httpx.TransportError, ValueError):
        data = {}
    return data if isinstance(data, dict) else {}


async def open_capture(
    chat: ChatClient,
    server_info: dict[str, Any],
    profile_topk: int | None = None,
    model_path: str | None = None,
) -> IndexerCapture:
    """Probe the server once (a 1-token /generate with return_indexer_topk) and resolve its layout."""
    client = GenerateClient(chat)
    try:
        probe = await client.generate(PROBE_MESSAGES, 1)
    except RequestFailed as err:
        raise UserError(
            f"--capture-indexer: the probe request to {client.root}/generate failed: {err}"
        ) from err
    if probe.indexer_topk is None:
        raise UserError(
            f"--capture-indexer: {client.root} returned no meta_info.indexer_topk; start the server with "
            "--enable-return-indexer-topk (a launched profile gets it automatically)"
        )
    flat = np.frombuffer(base64.b64decode(probe.indexer_topk), dtype="<i4")
    rows = probe.prompt_tokens + probe.output_tokens - 1
    if rows < probe.prompt_tokens or flat.size % rows:
        raise IndexerDataError(
            f"--capture-indexer: the probe's indexer_topk has {flat.size} values, not a whole number of "
            f"rows for {rows} positions (seqlen - 1)"
        )
    width = flat.size // rows
    last_row = flat[(probe.prompt_tokens - 1) * width : probe.prompt_tokens * width]
    layout = resolve_layout(
        server_info,
        await _model_info(chat),
        last_row,
        probe.prompt_tokens,
        profile_topk=profile_topk,
        model_config=_local_model_config(model_path),
    )
    return IndexerCapture(client, layout)
