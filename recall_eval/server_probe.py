"""What a running server says about itself: served model, context length, /server_info."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import httpx

from recall_eval.errors import BadInput, UserError
from recall_eval.retry import RetryPolicy, with_retries
from recall_eval.transport import TRANSIENT_STATUS, RequestFailed, auth_failure, status_failure

_CONTEXT_KEYS = ("max_model_len", "context_length", "context_len", "max_context_length")


@dataclass(frozen=True)
class ServerFacts:
    model: str  # the model name to send
    context_length: int | None  # longest prompt + answer the server takes; None if it does not say
    server_info: dict[str, Any] = field(default_factory=dict)  # scalar fields of /server_info and /v1/models
    version: str | None = None


def _scalars(data: dict[str, Any]) -> dict[str, Any]:
    """Top-level scalar fields only: /server_info can carry large nested live state."""
    return {
        key: value
        for key, value in data.items()
        if isinstance(value, (str, int, float, bool)) or value is None
    }


def _first_int(data: dict[str, Any], keys: tuple[str, ...]) -> int | None:
    for key in keys:
        value = data.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return None


PROBE_RETRY = RetryPolicy(attempts=3, backoff_s=0.25)  # a server that is down is said within a second


async def _get(http: httpx.AsyncClient, url: str) -> httpx.Response:
    """GET with the probe's retries (recall_eval.retry): transient answers and dropped connections."""

    async def once() -> httpx.Response:
        response = await http.get(url, timeout=10)
        if response.status_code in TRANSIENT_STATUS:
            raise status_failure(
                response.status_code, response.reason_phrase, response.headers.get("retry-after")
            )
        return response

    return await with_retries(once, PROBE_RETRY)


async def probe_server(base_url: str, http: httpx.AsyncClient, model: str | None = None) -> ServerFacts:
    """Ask /v1/models (required) and /server_info (optional). Unreachable: a one-line UserError."""
    root = base_url.rstrip("/")
    try:
        response = await _get(http, f"{root}/v1/models")
    except RequestFailed as err:
        if err.kind != "connection":  # 429 or 5xx after the retries
            raise UserError(
                f"{root}/v1/models answered {err}; is the server starting or overloaded?"
            ) from err
        reason = str(err).split(":")[0]
        raise UserError(
            f"cannot reach {root} ({reason}): is the server running? Check --base-url, or omit it to "
            "launch the embedded reference engine"
        ) from err
    if response.status_code in (401, 403):
        raise auth_failure(f"{root}/v1/models", response.status_code)
    if response.status_code != 200:
        raise UserError(
            f"{root}/v1/models answered HTTP {response.status_code}: not an OpenAI-compatible server; check --base-url"
        )
    try:
        cards = response.json().get("data") or []
    except ValueError as err:
        raise UserError(f"{root}/v1/models did not answer JSON; check --base-url") from err
    names = [str(card.get("id")) for card in cards if isinstance(card, dict) and card.get("id")]
    if model is None:
        if not names:
            raise UserError(f"{root}/v1/models lists no model; pass --model NAME")
        model = names[0]
    elif names and model not in names:
        raise BadInput(f"--model {model!r} is not served at {root} (served: {', '.join(names)})")
    card = next((c for c in cards if isinstance(c, dict) and c.get("id") == model), {})
    context = _first_int(card, _CONTEXT_KEYS)
    if context is None and isinstance(card.get("meta"), dict):  # llama.cpp: meta.n_ctx, per slot
        context = _first_int(card["meta"], ("n_ctx",))
    info: dict[str, Any] = {}
    try:
        info_response = await http.get(f"{root}/server_info", timeout=10)
        if info_response.status_code == 200 and isinstance(info_response.json(), dict):
            info = _scalars(info_response.json())
    except (httpx.TransportError, ValueError):
        info = {}
    if context is None:
        context = _first_int(info, _CONTEXT_KEYS)
    version = info.get("version")
    server_info = {**info, "model": model, "max_model_len": context}
    return ServerFacts(
        model=model,
        context_length=context,
        server_info=server_info,
        version=str(version) if version else None,
    )
