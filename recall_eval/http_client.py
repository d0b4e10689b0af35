"""The HTTP clients, built here only: the run's client (httpx for every request, plus, for streamed
chat answers from an http:// server, keep-alive connections that parse the event stream where its bytes
arrive, recall_eval.stream_connection; closing the client closes both), and the blocking client the
launchers poll their own servers with. Nothing outside recall_eval imports httpx (an import contract
in pyproject.toml): HTTPError and BlockingClient are what they catch and hold.

Proxies as the Python HTTP ecosystem does them: HTTP(S)_PROXY / ALL_PROXY and NO_PROXY from the
environment (httpx's trust_env), except that loopback hosts (127.0.0.0/8, ::1, localhost) are never
proxied: no proxy elsewhere can reach this machine's loopback, and the servers the harness launches
listen there. Both readers take the same decision per URL (RunClient.event_streams_for), so a proxy for
other hosts does not switch the fast reader off for the hosts it does not cover. TLS trust comes from
ServerAuth.verify (recall_eval.transport.tls_verify)."""

from __future__ import annotations

from collections.abc import Mapping
from types import TracebackType

import httpx

from recall_eval.stream_connection import EventStreamPool, stream_connections_enabled
from recall_eval.transport import ServerAuth, Timeouts

# never proxied (httpx mounts: None means the direct transport)
LOOPBACK_MOUNTS: dict[str, None] = {
    "all://127.0.0.1": None,
    "all://localhost": None,
    "all://[::1]": None,
}


class RunClient(httpx.AsyncClient):
    """An httpx.AsyncClient that also carries `event_streams` (None when RECALL_EVAL_HTTP=httpx: then
    streamed chat goes through httpx like everything else)."""

    def __init__(self, *, event_streams: EventStreamPool | None, **kwargs: object):
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.event_streams = event_streams
        self.insecure = kwargs.get("verify") is False  # --insecure: certificates are not checked

    def goes_direct(self, url: str) -> bool:
        """True when httpx itself would send a request for `url` without a proxy (NO_PROXY, loopback,
        or no proxy configured for its scheme)."""
        return self._transport_for_url(httpx.URL(url)) is self._transport

    def event_streams_for(self, url: str) -> EventStreamPool | None:
        """The fast stream reader for `url`: for plain http:// that goes direct; else None (httpx)."""
        if self.event_streams is None or not url.startswith("http://") or not self.goes_direct(url):
            return None
        return self.event_streams

    async def aclose(self) -> None:
        self._close_streams()
        await super().aclose()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None = None,
        exc_value: BaseException | None = None,
        traceback: TracebackType | None = None,
    ) -> None:
        self._close_streams()
        await super().__aexit__(exc_type, exc_value, traceback)

    def _close_streams(self) -> None:
        if self.event_streams is not None:
            self.event_streams.close()


def make_http_client(
    auth: ServerAuth | None = None, timeouts: Timeouts | None = None, max_connections: int = 256
) -> RunClient:
    """The client for one run: auth and headers on every request, connect timeout only (the stream
    reader and recall_eval.retry.with_retries own the rest); proxies from the environment except for loopback."""
    limits = timeouts or Timeouts()
    auth = auth or ServerAuth()
    client = RunClient(
        event_streams=None,
        headers=auth.http_headers(),
        timeout=httpx.Timeout(None, connect=limits.connect_s),
        limits=httpx.Limits(max_connections=max_connections),
        verify=auth.verify,
        mounts=LOOPBACK_MOUNTS,
    )
    if stream_connections_enabled():
        client.event_streams = EventStreamPool(client.headers.raw, limits.connect_s)
    return client


BlockingClient = httpx.Client
HTTPError = httpx.HTTPError  # what a failed request of either client raises (not a status code)


def make_blocking_client(
    headers: Mapping[str, str] | None = None, timeout_s: float | None = None
) -> BlockingClient:
    """The launchers' client for their own server (readiness polling, /server_info after a launch): the
    server runs on this machine for this harness, so proxy variables are not honoured (trust_env=False)."""
    return httpx.Client(trust_env=False, headers=dict(headers or {}), timeout=timeout_s)
