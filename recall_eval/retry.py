"""The one retry policy for every request to a server (probes, calibration, cases): which failures are
retried, how long to wait, and when to stop.

Retried: transient answers (429, 502, 503, 504) and failed or dropped connections (recall_eval.transport
classifies them); never a timeout, a refusal or an auth failure. The wait doubles from `backoff_s`,
is at least the server's Retry-After, is capped at `max_wait_s`, and gets a random share of up to
`jitter_s` on top, so requests that failed together (a concurrency of 64 meeting one 503) do not come
back together. The loop itself is tenacity's (stop after `attempts`, or when `give_up()` says the
server is gone); httpx's transport retries cover connect errors only, so this sits above it.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

import httpx
from tenacity import AsyncRetrying, RetryCallState, retry_if_exception, stop_after_attempt

from recall_eval.transport import RequestFailed, is_transient

_T = TypeVar("_T")


@dataclass(frozen=True)
class RetryPolicy:
    attempts: int = 4  # first try included
    backoff_s: float = 0.5  # doubled after each failure
    max_wait_s: float = 30.0  # a Retry-After longer than this is cut to it
    jitter_s: float = 0.5  # up to this much is added at random to every wait

    def wait_s(self, attempt: int, retry_after_s: float | None, draw: float) -> float:
        """The wait after failed attempt number `attempt` (1-based); `draw` is uniform in [0, 1)."""
        wait = self.backoff_s * 2 ** (attempt - 1)
        if retry_after_s is not None:
            wait = max(wait, retry_after_s)
        return min(wait, self.max_wait_s) + self.jitter_s * draw


def _retryable(error: BaseException) -> bool:
    return isinstance(error, RequestFailed) and is_transient(error)


async def with_retries(
    once: Callable[[], Awaitable[_T]],
    policy: RetryPolicy,
    total_s: float | None = None,
    give_up: Callable[[], bool] | None = None,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    draw: Callable[[], float] = random.random,
) -> _T:
    """once() (bounded by total_s each try), retried under `policy` on transient failures.

    give_up() is asked before each retry: True (e.g. the server process died) stops retrying.
    A transport error from httpx becomes a `connection` failure; the total limit a `timeout`. The
    failure raised at the end carries the number of attempts made.
    """
    attempts = 0

    async def attempt() -> _T:
        nonlocal attempts
        attempts += 1
        try:
            async with asyncio.timeout(total_s):
                return await once()
        except TimeoutError as err:
            raise RequestFailed(
                "timeout", f"no complete answer within {total_s:g}s", attempts=attempts
            ) from err
        except httpx.TransportError as err:
            failure = RequestFailed("connection", f"{type(err).__name__}: {err}".strip(), attempts=attempts)
            raise failure from err
        except RequestFailed as err:
            err.attempts = attempts
            raise

    def stop(state: RetryCallState) -> bool:
        return stop_after_attempt(policy.attempts)(state) or (give_up is not None and give_up())

    def wait(state: RetryCallState) -> float:
        error = state.outcome.exception() if state.outcome is not None else None
        retry_after = error.retry_after_s if isinstance(error, RequestFailed) else None
        return policy.wait_s(state.attempt_number, retry_after, draw())

    retrying = AsyncRetrying(
        stop=stop, wait=wait, retry=retry_if_exception(_retryable), sleep=sleep, reraise=True
    )
    return await retrying(attempt)
