"""What a running server says about itself: served model, context length, /server_info.

/v1/models is asked with the same manners as every request (recall_eval.transport: 429 and 5xx
retried with jitter, Retry-After honoured, a certificate failure named). With --model given, a server
whose /v1/models is missing or failing is still used: one warning line (ServerFacts.warnings), and the
context length is then unknown unless /server_info says it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import httpx

from recall_eval.errors import BadInput, UserError
from recall_eval.retry import RetryPolicy, with_retries
from recall_eval.transport import (
    RequestFailed,
    auth_failure,
    status_failure,
    tls_failure_line,
    transport_failure,
)

_CONTEXT_KEYS = ("max_model_len", "context_length", "context_len", "max_context_length")


@dataclass(frozen=True)
class ServerFacts:
    model: str  # the model name to send
    context_length: int | None  # longest prompt + answer the server takes; None if it does not say
    server_info: dict[str, Any] = field(default_factory=dict)  # scalar fields of /server_info and /v1/models
    version: str | None = None
    warnings: tuple[str, ...] = ()  # what the server did that the run worked around (one line each)


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


EXTERNAL_HINT = "is the server running? Check --base-url, or omit it to launch the embedded reference engine"
PROBE_RETRY = RetryPolicy(attempts=3, backoff_s=0.25)  # a server that is down is said within a second


async def _get_models(url: str, http: httpx.AsyncClient) -> httpx.Response:
    """GET /v1/models with the cases' retry manners; 401/403 raise AuthFailed, other answers return."""

    async def once() -> httpx.Response:
        response = await http.get(url, timeout=10, follow_redirects=True)
        if response.status_code in (401, 403):
            raise auth_failure(url, response.status_code)
        if response.status_code == 429 or response.status_code >= 500:
            raise status_failure(
                response.status_code, response.text[:200], response.headers.get("retry-after")
            )
        return response

    return await with_retries(once, PROBE_RETRY)


async def probe_server(
    base_url: str, http: httpx.AsyncClient, model: str | None = None, hint: str = EXTERNAL_HINT
) -> ServerFacts:
    """Ask /v1/models (required unless `model` is given) and /server_info (optional). Unreachable: a
    one-line UserError ending with `hint`; a certificate not trusted: one line saying so."""
    root = base_url.rstrip("/")
    models_url = f"{root}/v1/models"
    warnings: list[str] = []
    cards: list[Any] = []
    try:
        response = await _get_models(models_url, http)
        failed = None if response.status_code == 200 else f"answered HTTP {response.status_code}"
        if failed is None:
            try:
                data = response.json()
                cards = list(data.get("data") or []) if isinstance(data, dict) else []
            except ValueError:
                failed = "did not answer JSON"
    except RequestFailed as err:
        if err.kind == "tls":
            raise UserError(str(err)) from None
        if err.kind == "connection":
            raise UserError(f"cannot reach {root} ({err}): {hint}") from err
        if model is None:  # 429 or 5xx after the retries
            raise UserError(f"{models_url} answered {err}; is the server starting or overloaded?") from err
        failed = f"failed ({err})"
    except httpx.TransportError as err:
        failure = transport_failure(err, root)
        if failure.kind == "tls":
            raise UserError(tls_failure_line(root, err)) from None
        raise UserError(f"cannot reach {root} ({type(err).__name__}): {hint}") from err
    if failed is not None:
        if model is None:
            raise UserError(
                f"{models_url} {failed}: not an OpenAI-compatible server at this URL; check --base-url "
                "(http://HOST:PORT, with or without /v1), or pass --model NAME if the server has no /v1/models"
            )
        warnings.append(f"{models_url} {failed}; using --model {model} as given (context length unknown)")
    names = [str(card.get("id")) for card in cards if isinstance(card, dict) and card.get("id")]
    if model is None:
        if not names:
            raise UserError(f"{models_url} lists no model; pass --model NAME")
        model = names[0]
    elif names and model not in names:
        raise BadInput(f"--model {model!r} is not served at {root} (served: {', '.join(names)})")
    card = next((c for c in cards if isinstance(c, dict) and c.get("id") == model), {})
    context = _first_int(card, _CONTEXT_KEYS)
    if context is None and isinstance(card.get("meta"), dict):  # llama.cpp: meta.n_ctx, per slot
        context = _first_int(card["meta"], ("n_ctx",))
    info: dict[str, Any] = {}
    try:
        info_response = await http.get(f"{root}/server_info", timeout=10, follow_redirects=True)
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
        warnings=tuple(warnings),
    )
