"""The one HTTP layer every request to a server goes through: auth, headers, timeouts, retries.

- ServerAuth carries the API key (sent as ``Authorization: Bearer <key>``) and extra headers; the
  client factory puts them on every request (models, tokenize, chat, /generate, /server_info).
  The key is used, never written: repr() hides it and nothing here logs it.
- Timeouts are four: connecting, the first token (prefill of a long prompt can take minutes), the
  gap between two chunks of a stream (a stalled stream is cut long before the total), and the total.
  httpx's own read timeout is off: a server may hold the response headers until its first token, so
  the stream reader applies the first-token and idle limits itself (recall_eval.chat_client).
- What a failure is: RequestFailed with its kind, is_transient() for those worth retrying, the
  Retry-After a server sent. How they are retried is recall_eval.retry, the one retry policy.
  A certificate the client does not trust is a `tls` failure (transport_failure): named in one line,
  never retried (it will not change).
- TLS trust (tls_verify): --ca-bundle, else $REQUESTS_CA_BUNDLE / $SSL_CERT_FILE / $CURL_CA_BUNDLE as
  requests and curl read them, else certifi's roots; --insecure turns checking off.
"""

from __future__ import annotations

import email.utils
import os
import re
import ssl
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

import httpx

from recall_eval.errors import AuthFailed

KEY_ENV_VARS = ("RECALL_EVAL_API_KEY", "OPENAI_API_KEY")
TRANSIENT_STATUS = frozenset({429, 502, 503, 504})
AUTH_FIX = "pass --api-key KEY (or set RECALL_EVAL_API_KEY or OPENAI_API_KEY)"

# Said with a 4xx only: a 5xx that mentions a context length is a server failure, not a verdict on the
# prompt. Wordings: SGLang/vLLM ("longer than the model's context length", "maximum context length is"),
# OpenAI (context_length_exceeded), llama.cpp ("exceeds the available context size", exceed_context_size).
_TOO_LONG = re.compile(
    r"longer than the model's context length|exceeds the model's (maximum )?context length"
    r"|maximum context length is|context_length_exceeded|exceeds the maximum allowed length"
    r"|exceeds the available context size|exceed_context_size",
    re.IGNORECASE,
)

FailureKind = Literal["too_long", "rejected", "server", "connection", "timeout", "protocol", "auth", "tls"]
CA_ENV_VARS = ("REQUESTS_CA_BUNDLE", "SSL_CERT_FILE", "CURL_CA_BUNDLE")  # in the order requests reads them
TLS_FIX = "pass --ca-bundle PATH (the CA that signed it), or --insecure to skip the check"


class RequestFailed(Exception):
    """A request that did not give a usable answer; `kind` is what the runner turns into an outcome.

    too_long    the server said the prompt exceeds its context length
    rejected    another 4xx: not retried
    auth        401/403: the key is missing or wrong (not retried; the sweep stops with one line)
    server      a 5xx (or an error event); 429/502/503/504 after bounded retries
    connection  could not connect / the connection dropped, after bounded retries
    timeout     no first token, no chunk for the idle limit, or over the total limit: not retried
    protocol    the answer is not a readable event stream (malformed JSON, not SSE, oversized)
    tls         the server's certificate is not trusted (not retried)
    `partial` keeps what arrived before the failure (an excerpt for the result).
    """

    def __init__(
        self,
        kind: FailureKind,
        message: str,
        status: int | None = None,
        attempts: int = 1,
        retry_after_s: float | None = None,
        partial: str = "",
    ):
        super().__init__(message)
        self.kind = kind
        self.status = status
        self.attempts = attempts
        self.retry_after_s = retry_after_s
        self.partial = partial


@dataclass(frozen=True)
class ServerAuth:
    """Credentials, headers and TLS trust for a server. Never stored: the run spec records only header
    names. verify: what httpx checks certificates with (an SSLContext, or False for --insecure)."""

    api_key: str | None = field(default=None, repr=False)
    headers: Mapping[str, str] = field(default_factory=dict, repr=False)
    verify: ssl.SSLContext | bool = field(default=True, repr=False, compare=False)

    def http_headers(self) -> dict[str, str]:
        sent = dict(self.headers)
        if self.api_key:
            sent["Authorization"] = f"Bearer {self.api_key}"
        return sent

    def secrets(self) -> tuple[str, ...]:
        """Every value that must never be written (for recall_eval.redact)."""
        values = [self.api_key or ""] + list(self.headers.values())
        return tuple(value for value in values if value)

    def __repr__(self) -> str:
        names = ", ".join(sorted(self.headers))
        return f"ServerAuth(api_key={'set' if self.api_key else 'unset'}, headers=[{names}])"

    @classmethod
    def resolve(
        cls,
        api_key: str | None,
        headers: Mapping[str, str] | None = None,
        env: Mapping[str, str] | None = None,
        verify: ssl.SSLContext | bool = True,
    ) -> ServerAuth:
        """--api-key, else $RECALL_EVAL_API_KEY, else $OPENAI_API_KEY; headers as given."""
        environ = os.environ if env is None else env
        key = api_key or next((environ[name] for name in KEY_ENV_VARS if environ.get(name)), None)
        return cls(api_key=key, headers=dict(headers or {}), verify=verify)


def ca_bundle_of(
    ca_bundle: str | os.PathLike[str] | None, env: Mapping[str, str] | None = None
) -> str | None:
    """The CA file to trust: --ca-bundle, else the first of CA_ENV_VARS that is set; None: defaults."""
    environ = os.environ if env is None else env
    if ca_bundle:
        return os.fspath(ca_bundle)
    return next((environ[name] for name in CA_ENV_VARS if environ.get(name)), None)


def tls_verify(
    ca_bundle: str | os.PathLike[str] | None = None,
    insecure: bool = False,
    env: Mapping[str, str] | None = None,
) -> ssl.SSLContext | bool:
    """How certificates are checked: False for --insecure; an SSLContext trusting the CA file (a
    ValueError naming it when it cannot be read); True (httpx's defaults: certifi) otherwise."""
    if insecure:
        return False
    path = ca_bundle_of(ca_bundle, env)
    if path is None:
        return True
    try:
        if os.path.isdir(path):
            return ssl.create_default_context(capath=path)
        return ssl.create_default_context(cafile=path)
    except (OSError, ssl.SSLError) as err:
        raise ValueError(
            f"cannot read the CA bundle {path}: {getattr(err, 'strerror', None) or err}"
        ) from None


def is_certificate_error(err: BaseException) -> bool:
    """A TLS handshake that failed on the certificate (self-signed, unknown CA, wrong host name)."""
    seen: BaseException | None = err
    while seen is not None:
        if isinstance(seen, ssl.SSLCertVerificationError) or "CERTIFICATE_VERIFY_FAILED" in str(seen):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def tls_failure_line(url: str, err: BaseException) -> str:
    """The one line for a certificate the client does not trust."""
    reason = next(
        (str(e.verify_message) for e in _chain(err) if isinstance(e, ssl.SSLCertVerificationError)), None
    )
    why = f" ({reason})" if reason else ""
    return f"{url}: the server's TLS certificate is not trusted{why}; {TLS_FIX}"


def _chain(err: BaseException) -> list[BaseException]:
    found: list[BaseException] = []
    seen: BaseException | None = err
    while seen is not None and seen not in found:
        found.append(seen)
        seen = seen.__cause__ or seen.__context__
    return found


def parse_header(text: str) -> tuple[str, str]:
    """'Name: value' -> (name, value); a BadInput-worthy ValueError for anything else."""
    name, sep, value = text.partition(":")
    name = name.strip()
    if not sep or not name or any(ch.isspace() for ch in name):
        raise ValueError(f"--header {text.split(':')[0]!r}...: write it as 'Name: value'")
    if has_line_break(value):
        raise ValueError(f"--header {name}: the value holds a line break or NUL; give it on one line")
    return name, value.strip()


def has_line_break(text: str) -> bool:
    """CR, LF or NUL: never valid in an HTTP header value (they would end it, or split it)."""
    return any(ch in text for ch in "\r\n\0")


@dataclass(frozen=True)
class Timeouts:
    connect_s: float = 10.0  # opening the TCP (and TLS) connection
    first_token_s: float = 600.0  # request sent -> first streamed chunk (covers prefill)
    idle_s: float = 60.0  # longest gap between two chunks once the stream flows
    total_s: float = 600.0  # the whole request, retries not included

    @classmethod
    def for_total(cls, total_s: float, idle_s: float | None = None) -> Timeouts:
        """Defaults scaled to a per-request total: first token up to the total; idle a fifth of the
        total, at most 60 s (a stream silent that long has stalled: decode chunks come every ~10-100 ms)."""
        idle = idle_s if idle_s is not None else min(60.0, max(1.0, total_s / 5))
        return cls(connect_s=min(10.0, total_s), first_token_s=total_s, idle_s=idle, total_s=total_s)


def retry_after_seconds(value: str | None, now: float | None = None) -> float | None:
    """Retry-After as seconds: delta-seconds or an HTTP date (RFC 9110 10.2.3); None if absent/bad."""
    if not value:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


def auth_failure(url: str, status: int, message: str = "") -> AuthFailed:
    """The one line for a 401/403 answer (with the server's own message when it gave one)."""
    said = f" ({message})" if message else ""
    return AuthFailed(f"{url} answered HTTP {status}{said}: the server rejected the API key; {AUTH_FIX}")


def classify_error_message(message: str, status: int | None) -> FailureKind:
    """too_long for a 4xx context-length refusal (SGLang, vLLM, OpenAI, llama.cpp wordings), else by status."""
    if status is not None and 400 <= status < 500 and _TOO_LONG.search(message):
        return "too_long"
    if status is not None and status >= 500:
        return "server"
    return "rejected"


def status_failure(status: int, message: str, retry_after: str | None = None) -> RequestFailed:
    """The RequestFailed for an HTTP error status (message already extracted from the body)."""
    if status in (401, 403):
        return RequestFailed("auth", f"HTTP {status}: {message}; {AUTH_FIX}", status)
    kind = classify_error_message(message, status)
    if status == 429:
        kind = "server"
    return RequestFailed(
        kind, f"HTTP {status}: {message}", status, retry_after_s=retry_after_seconds(retry_after)
    )


def transport_failure(err: httpx.TransportError, url: str | None = None) -> RequestFailed:
    """The RequestFailed for an httpx transport error: `tls` for a certificate; `timeout` for a
    connection that was made but not answered in time (read, write; not retried: a hung server stays
    hung); else `connection` (refused, dropped, or no connection within the connect limit)."""
    if is_certificate_error(err):
        if url is None:
            try:
                url = str(err.request.url.copy_with(path="/", query=None))
            except RuntimeError:  # an error raised without its request
                url = "the server"
        return RequestFailed("tls", tls_failure_line(url, err))
    if isinstance(err, httpx.TimeoutException) and not isinstance(
        err, httpx.ConnectTimeout | httpx.PoolTimeout
    ):
        return RequestFailed("timeout", f"connected, but no response in time ({type(err).__name__})")
    return RequestFailed("connection", f"{type(err).__name__}: {err}".strip())


def is_transient(failure: RequestFailed) -> bool:
    if failure.kind == "connection":
        return True
    return failure.kind == "server" and (failure.status is None or failure.status in TRANSIENT_STATUS)
