"""Request models and response shapes of the SGLang 0.5.23 HTTP API subset the reference server speaks.

Field names, defaults, SSE framing and error envelopes follow SGLang's
entrypoints/openai/protocol.py, serving_chat.py, sse_utils.py and http_server.py. Fields a
client may send that the reference engine does not use (temperature, top_p, seed, ...) are
accepted and ignored: decoding is always greedy.
"""

from __future__ import annotations

import json
import time
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, model_validator

DEFAULT_MODEL_NAME = "default"  # what SGLang echoes when a request names no model
WEIGHT_VERSION = "default"
GENERATE_DEFAULT_MAX_NEW_TOKENS = 128  # SGLang SamplingParams default
FinishReason = Literal["stop", "length"]


class _Lenient(BaseModel):
    model_config = ConfigDict(extra="ignore")


class TextPart(_Lenient):
    type: Literal["text"]
    text: str


class ChatMessageIn(_Lenient):
    role: Literal["system", "user", "assistant"]  # the roles the chat template knows
    content: str | list[TextPart] | None = None

    def text(self) -> str:
        if self.content is None:
            return ""
        if isinstance(self.content, str):
            return self.content
        return "".join(part.text for part in self.content)


class StreamOptions(_Lenient):
    include_usage: bool | None = False
    continuous_usage_stats: bool | None = False


class ChatCompletionRequest(_Lenient):
    messages: list[ChatMessageIn]
    model: str = DEFAULT_MODEL_NAME
    max_tokens: int | None = None
    max_completion_tokens: int | None = None
    n: int = 1
    stop: str | list[str] | None = None
    stream: bool = False
    stream_options: StreamOptions | None = None
    temperature: float | None = None  # accepted; decoding is greedy
    top_p: float | None = None
    top_k: int | None = None
    seed: int | None = None

    def max_new_tokens(self) -> int | None:
        # SGLang: max_completion_tokens or max_tokens (None: up to the context length)
        return self.max_completion_tokens or self.max_tokens

    def role_dicts(self) -> list[dict[str, str]]:
        return [{"role": m.role, "content": m.text()} for m in self.messages]


class TokenizeRequest(_Lenient):
    model: str = DEFAULT_MODEL_NAME
    prompt: str | list[str] | None = None
    messages: list[ChatMessageIn] | None = None
    add_special_tokens: bool = True
    add_generation_prompt: bool | None = None

    @model_validator(mode="after")
    def _exactly_one_input(self) -> TokenizeRequest:
        if (self.prompt is None) == (self.messages is None):
            raise ValueError("Exactly one of 'prompt' or 'messages' must be provided.")
        return self


class DetokenizeRequest(_Lenient):
    model: str = DEFAULT_MODEL_NAME
    tokens: list[int] | list[list[int]]
    skip_special_tokens: bool = True


class GenerateRequest(_Lenient):
    text: str | list[str] | None = None
    input_ids: list[int] | list[list[int]] | None = None
    sampling_params: dict[str, Any] | None = None
    stream: bool = False
    return_indexer_topk: bool = False
    rid: str | None = None


def stop_strings(stop: str | list[str] | None) -> tuple[str, ...]:
    if stop is None:
        return ()
    return (stop,) if isinstance(stop, str) else tuple(s for s in stop if s)


# ----- error envelopes -----


def error_response_body(message: str, err_type: str = "BadRequestError", code: int = 400) -> dict[str, Any]:
    """SGLang's ErrorResponse (OpenAI routes)."""
    return {"object": "error", "message": message, "type": err_type, "param": None, "code": code}


def generate_error_body(message: str) -> dict[str, Any]:
    """SGLang's /generate error (http_server._create_error_response)."""
    return {"error": {"message": message}}


# ----- SSE -----


def sse(payload: dict[str, Any]) -> str:
    return f"data: {json.dumps(payload, ensure_ascii=False, separators=(',', ':'))}\n\n"


SSE_DONE = "data: [DONE]\n\n"


# ----- chat completions -----


def usage_info(prompt_tokens: int, completion_tokens: int) -> dict[str, Any]:
    return {
        "prompt_tokens": prompt_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
        "completion_tokens": completion_tokens,
        "prompt_tokens_details": None,
        "reasoning_tokens": 0,
        "completion_tokens_details": None,
    }


def chat_chunk(
    chunk_id: str,
    created: int,
    model: str,
    *,
    role: str | None = None,
    content: str | None = None,
    finish_reason: FinishReason | None = None,
    matched_stop: int | str | None = None,
    usage: dict[str, Any] | None = None,
) -> str:
    """One chat.completion.chunk as sse_utils.build_sse_content frames it (None fields of delta omitted)."""
    delta: dict[str, Any] = {"reasoning_content": None}
    if role is not None:
        delta["role"] = role
    if content is not None:
        delta["content"] = content
    chunk: dict[str, Any] = {
        "id": chunk_id,
        "object": "chat.completion.chunk",
        "created": created,
        "model": model,
        "choices": [
            {
                "index": 0,
                "delta": delta,
                "logprobs": None,
                "finish_reason": finish_reason,
                "matched_stop": matched_stop,
            }
        ],
    }
    if usage is not None:
        chunk["usage"] = usage
    return sse(chunk)


def chat_usage_chunk(chunk_id: str, created: int, model: str, usage: dict[str, Any]) -> str:
    """The final usage-only chunk (stream_options.include_usage)."""
    return sse(
        {
            "id": chunk_id,
            "object": "chat.completion.chunk",
            "created": created,
            "model": model,
            "choices": [],
            "usage": usage,
        }
    )


def chat_stream_error(message: str) -> str:
    """A mid-stream error event (serving_chat create_streaming_error_response)."""
    return sse({"error": error_response_body(message, "BAD_REQUEST", 400)})


def chat_response(
    response_id: str,
    model: str,
    text: str,
    finish_reason: FinishReason,
    matched_stop: int | str | None,
    prompt_tokens: int,
    completion_tokens: int,
) -> dict[str, Any]:
    return {
        "id": response_id,
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": text, "reasoning_content": None},
                "logprobs": None,
                "finish_reason": finish_reason,
                "matched_stop": matched_stop,
            }
        ],
        "usage": usage_info(prompt_tokens, completion_tokens),
        "metadata": {"weight_version": WEIGHT_VERSION},
    }


# ----- /generate -----


def finish_reason_json(reason: FinishReason, matched: int | str | None, length: int) -> dict[str, Any]:
    """SGLang's FINISH_* to_json(): stop carries what matched, length carries the token count."""
    if reason == "length":
        return {"type": "length", "length": length}
    return {"type": "stop", "matched": matched}


def abort_finish_reason(message: str) -> dict[str, Any]:
    return {"type": "abort", "message": message, "status_code": 400, "err_type": "BadRequestError"}


def generate_output(
    rid: str,
    text: str,
    output_ids: list[int],
    prompt_tokens: int,
    finish_reason: dict[str, Any] | None,
    e2e_latency: float | None,
    indexer_topk_b64: str | None = None,
    cached_tokens: int = 0,
) -> dict[str, Any]:
    meta_info: dict[str, Any] = {
        "id": rid,
        "finish_reason": finish_reason,
        "prompt_tokens": prompt_tokens,
        "weight_version": WEIGHT_VERSION,
        "num_retractions": 0,
        "reasoning_tokens": 0,
        "completion_tokens": len(output_ids),
        "cached_tokens": cached_tokens,
    }
    if indexer_topk_b64 is not None:
        meta_info["indexer_topk"] = indexer_topk_b64
    if e2e_latency is not None:
        meta_info["e2e_latency"] = e2e_latency
    return {"text": text, "output_ids": list(output_ids), "meta_info": meta_info}


# ----- /v1/models -----


def model_list(served_model_name: str, max_model_len: int, created: int) -> dict[str, Any]:
    card = {
        "id": served_model_name,
        "object": "model",
        "created": created,
        "owned_by": "sglang",
        "root": served_model_name,
        "parent": None,
        "max_model_len": max_model_len,
    }
    return {"object": "list", "data": [card]}
