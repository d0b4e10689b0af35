"""What a running server says about itself: served model, context length, /server_info.

/v1/models is asked with the same manners as every request (recall_eval.transport: 429 and 5xx
retried with jitter, Retry-After honoured, a certificate failure named). With --model given, a server
whose /v1/models is missing or failing is still used: one warning line (ServerFacts.warnings), and the
context length is then unknown unless /server_info says it. A refusal is one line with the status, the
server's own message (JSON `error.message`, else the first line of its text: an HTML error page's
title) and what to do; a server that accepts the connection but never answers is said to be that, with
the option that gives it longer (--probe-timeout). The context limit is read from the model card under
the names servers and gateways use (vLLM/SGLang max_model_len, OpenRouter-style context_length,
LiteLLM's max_input_tokens, llama.cpp's meta.n_ctx).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from http import HTTPStatus
from typing import Any

import httpx

from recall_eval.errors import BadInput, UserError
from recall_eval.event_stream import error_text
from recall_eval.retry import RetryPolicy, with_retries
from recall_eval.transport import (
    AUTH_FIX,
    RequestFailed,
    auth_failure,
    status_failure,
    tls_failure_line,
    transport_failure,
)

# vLLM/SGLang, OpenRouter and gateways, older servers; LiteLLM's max_input_tokens (top level, or in
# model_info as its /model/info has it) is the prompt limit: a prompt plus budget under it fits
_CONTEXT_KEYS = (
    "max_model_len", "context_length", "context_len", "max_context_length", "max_input_tokens",
)  # fmt: skip


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
PROBE_WAIT_S = 10.0  # how long /v1/models may take to answer (--probe-timeout)
PROBE_WAIT_FLAG = "--probe-timeout"
PROXY_AUTH_FIX = (
    "a proxy between here and the server wants credentials: give them in the proxy URL "
    "(HTTPS_PROXY=http://USER:PASS@PROXY:PORT), or add the server's host to NO_PROXY"
)
# a gateway's refusal of the key that is not a 401/403 (LiteLLM answers 400 for a bad key)
_KEY_WORDS = ("api key", "api_key", "apikey", "token", "authenticat", "unauthori", "credential")


def _said(response: httpx.Response) -> str:
    """`HTTP 407 Proxy Authentication Required: <the server's own first line>`."""
    status = response.status_code
    try:
        phrase = HTTPStatus(status).phrase
    except ValueError:
        phrase = response.reason_phrase or ""
    message = error_text(response.content) if response.content else ""
    head = f"HTTP {status} {phrase}".rstrip()
    return f"{head}: {message}" if message and message != "no body" else head


def _refusal(models_url: str, response: httpx.Response) -> UserError | None:
    """A 4xx of /v1/models that no --model can work around (a proxy's or a gateway's refusal of the
    credentials): its one line; None for the others."""
    status = response.status_code
    said = _said(response)
    if status == 407:
        return UserError(f"{models_url} answered {said}; {PROXY_AUTH_FIX}")
    if 400 <= status < 500 and any(word in said.lower() for word in _KEY_WORDS):
        return UserError(f"{models_url} answered {said}; the server refused the credentials: {AUTH_FIX}")
    return None


async def _get_models(url: str, http: httpx.AsyncClient, wait_s: float) -> httpx.Response:
    """GET /v1/models with the cases' retry manners; 401/403 raise AuthFailed, other answers return."""

    async def once() -> httpx.Response:
        response = await http.get(url, timeout=wait_s, follow_redirects=True)
        if response.status_code in (401, 403):
            raise auth_failure(url, response.status_code, error_text(response.content))
        if response.status_code == 429 or response.status_code >= 500:
            raise status_failure(
                response.status_code, error_text(response.content), response.headers.get("retry-after")
            )
        return response

    return await with_retries(once, PROBE_RETRY)


async def refuses_connections(base_url: str, http: httpx.AsyncClient, wait_s: float = 5.0) -> bool:
    """True when the server cannot be connected to at all (refused, no such host): it is gone, not
    slow. Any answer, or a connection made but not answered, is False."""
    try:
        await http.get(f"{base_url.rstrip('/')}/v1/models", timeout=wait_s)
    except httpx.ConnectError:
        return True
    except httpx.HTTPError:
        return False
    return False


async def probe_server(
    base_url: str,
    http: httpx.AsyncClient,
    model: str | None = None,
    hint: str = EXTERNAL_HINT,
    wait_s: float = PROBE_WAIT_S,
) -> ServerFacts:
    """Ask /v1/models (required unless `model` is given; answered within `wait_s`) and /server_info
    (optional). Unreachable: a one-line UserError ending with `hint`; connected but not answered: one
    line naming --probe-timeout; a certificate not trusted or a refused credential: one line saying so."""
    root = base_url.rstrip("/")
    models_url = f"{root}/v1/models"
    warnings: list[str] = []
    cards: list[Any] = []
    try:
        response = await _get_models(models_url, http, wait_s)
        failed = None if response.status_code == 200 else f"answered {_said(response)}"
        if failed is not None and (refusal := _refusal(models_url, response)) is not None:
            raise refusal
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
        if err.kind == "timeout":  # connected, then silence: a server still loading, or hung
            raise UserError(
                f"{root} accepted the connection but sent no response to GET /v1/models in {wait_s:g} s "
                f"(hung, or still loading); if it needs longer, raise {PROBE_WAIT_FLAG} (now {wait_s:g})"
            ) from err
        if model is None:  # 429 or 5xx after the retries
            raise UserError(
                f"{models_url} answered {err}; is the server starting or overloaded? (behind a proxy or "
                "gateway: check that it reaches the server)"
            ) from err
        failed = f"failed ({err})"
    except httpx.TransportError as err:
        failure = transport_failure(err, root)
        if failure.kind == "tls":
            raise UserError(tls_failure_line(root, err)) from None
        raise UserError(f"cannot reach {root} ({type(err).__name__}): {hint}") from err
    if failed is not None:
        if model is None:
            raise UserError(
                f"{models_url} {failed}; not an OpenAI-compatible server at this URL? Check --base-url "
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
    if context is None and isinstance(card.get("model_info"), dict):  # LiteLLM's model_info
        context = _first_int(card["model_info"], _CONTEXT_KEYS)
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
