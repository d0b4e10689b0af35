"""Is the server ready? /health_generate 200, else (no such route) /v1/models listing the model."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from recall_eval.http_client import BlockingClient, HTTPError, make_blocking_client

NO_ROUTE = frozenset({404, 405, 501})


class NotReadyInTime(Exception):
    """The server did not become ready before the deadline."""


class StoppedWaiting(Exception):
    """should_stop() asked to stop waiting (the process died); carries what it returned."""

    def __init__(self, reason: object):
        super().__init__(str(reason))
        self.reason = reason


@dataclass
class Probe:
    """One readiness check; remembers whether /health_generate exists on this server."""

    base_url: str
    model: str | None = None  # the model /v1/models must list; None: any model
    use_health_generate: bool = True

    def __call__(self, client: BlockingClient, timeout_s: float) -> bool:
        try:
            if self.use_health_generate:
                response = client.get(f"{self.base_url}/health_generate", timeout=timeout_s)
                if response.status_code == 200:
                    return True
                if response.status_code not in NO_ROUTE:
                    return False
                self.use_health_generate = False
            return self.model_listed(client, timeout_s)
        except HTTPError:
            return False

    def model_listed(self, client: BlockingClient, timeout_s: float) -> bool:
        response = client.get(f"{self.base_url}/v1/models", timeout=timeout_s)
        if response.status_code != 200:
            return False
        ids = model_ids(response.json())
        return bool(ids) if self.model is None else self.model in ids


def model_ids(models_json: Any) -> list[str]:
    data = models_json.get("data", []) if isinstance(models_json, dict) else []
    return [str(item["id"]) for item in data if isinstance(item, dict) and "id" in item]


def wait_ready(
    probe: Probe,
    timeout_s: float,
    should_stop: Callable[[], object | None] = lambda: None,
    first_delay_s: float = 0.25,
    max_delay_s: float = 2.0,
    headers: Mapping[str, str] | None = None,
    early_max_delay_s: float = 0.5,
    early_s: float = 30.0,
) -> float:
    """Poll with backoff until ready; returns the seconds waited. Checks should_stop every 0.2 s at
    least, raising StoppedWaiting with its value, and raises NotReadyInTime after timeout_s.

    For the first early_s seconds the pause stays at most early_max_delay_s: the embedded reference
    server is ready 3-4 s after its start, and the backoff up to 2 s found it ready ~1.5 s late (a
    slow server, minutes to load, is then polled every max_delay_s)."""
    started = time.monotonic()
    deadline = started + timeout_s
    delay = first_delay_s
    with make_blocking_client(headers) as client:
        while True:
            reason = should_stop()
            if reason is not None:
                raise StoppedWaiting(reason)
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise NotReadyInTime(f"not ready after {timeout_s:.0f} s")
            if probe(client, timeout_s=max(1.0, min(30.0, remaining))):
                return time.monotonic() - started
            reason = should_stop()
            if reason is not None:
                raise StoppedWaiting(reason)
            pause_until = min(deadline, time.monotonic() + delay)
            while time.monotonic() < pause_until:
                if should_stop() is not None:
                    break
                time.sleep(min(0.2, max(0.0, pause_until - time.monotonic())))
            early = time.monotonic() - started < early_s
            delay = min(early_max_delay_s if early else max_delay_s, delay * 1.5)


def fetch_server_info(
    base_url: str, timeout_s: float = 10.0, headers: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """What /server_info (or the older /get_server_info) and /v1/models say; empty parts if absent.
    (Stored only through recall_eval.redact's allow-list: SGLang's carries its --api-key.)"""
    info: dict[str, Any] = {}
    with make_blocking_client(headers, timeout_s) as client:
        for path in ("/server_info", "/get_server_info"):
            try:
                response = client.get(base_url + path)
            except HTTPError:
                continue
            if response.status_code == 200:
                try:
                    info["server_info"] = response.json()
                except ValueError:
                    continue
                break
        try:
            response = client.get(base_url + "/v1/models")
            if response.status_code == 200:
                info["models"] = response.json()
        except (HTTPError, ValueError):
            pass
    return info
