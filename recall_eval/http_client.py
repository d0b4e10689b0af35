"""The HTTP clients, built here only: the run's client (httpx for every request, plus, for streamed
chat answers from an http:// server, keep-alive connections that parse the event stream where its bytes
arrive, recall_eval.stream_connection; closing the client closes both), and the blocking client the
launchers poll their own servers with. Nothing outside recall_eval imports httpx (an import contract
in pyproject.toml): HTTPError and BlockingClient are what they catch and hold."""

from __future__ import annotations

from collections.abc import Mapping
from types import TracebackType

import httpx

from recall_eval.stream_connection import EventStreamPool, stream_connections_enabled
from recall_eval.transport import ServerAuth, Timeouts


class RunClient(httpx.AsyncClient):
    """An httpx.AsyncClient that also carries `event_streams` (None when a proxy is configured or
    RECALL_EVAL_HTTP=httpx: then streamed chat goes through httpx like everything else)."""

    def __init__(self, *, event_streams: EventStreamPool | None, **kwargs: object):
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.event_streams = event_streams

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
    reader and recall_eval.retry.with_retries own the rest); HTTP(S)_PROXY are honoured (httpx's trust_env)."""
    limits = timeouts or Timeouts()
    headers = (auth or ServerAuth()).http_headers()
    client = RunClient(
        event_streams=None,
        headers=headers,
        timeout=httpx.Timeout(None, connect=limits.connect_s),
        limits=httpx.Limits(max_connections=max_connections),
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
