"""The HTTP layer alone: auth headers on every request, Retry-After, the one retry helper, timeouts.

Unit tests with httpx.MockTransport (one function each); the real servers are in tests/e2e."""

from __future__ import annotations

import asyncio
import email.utils
import time

import httpx
import pytest

from recall_eval.chat_client import ChatClient
from recall_eval.errors import AuthFailed, UserError
from recall_eval.http_client import make_http_client
from recall_eval.retry import RetryPolicy, with_retries
from recall_eval.server_probe import probe_server
from recall_eval.tokenization import probe_tokenizer
from recall_eval.transport import (
    RequestFailed,
    ServerAuth,
    Timeouts,
    parse_header,
    retry_after_seconds,
)
from recall_eval.types import ChatMessage, Endpoint

MESSAGES = (ChatMessage(role="user", content="hi"),)


def test_auth_resolution_order():
    env = {"RECALL_EVAL_API_KEY": "from-recall", "OPENAI_API_KEY": "from-openai"}
    assert ServerAuth.resolve("given", env=env).api_key == "given"
    assert ServerAuth.resolve(None, env=env).api_key == "from-recall"
    assert ServerAuth.resolve(None, env={"OPENAI_API_KEY": "from-openai"}).api_key == "from-openai"
    assert ServerAuth.resolve(None, env={}).api_key is None


def test_auth_never_shows_its_key():
    auth = ServerAuth(api_key="sk-secret-1234", headers={"X-Org": "org-secret"})
    assert "sk-secret-1234" not in repr(auth) and "org-secret" not in repr(auth)
    assert auth.http_headers() == {"X-Org": "org-secret", "Authorization": "Bearer sk-secret-1234"}
    assert set(auth.secrets()) == {"sk-secret-1234", "org-secret"}


@pytest.mark.parametrize(
    ("text", "parsed"),
    [("X-Org: acme", ("X-Org", "acme")), ("Cookie:a=b; c=d", ("Cookie", "a=b; c=d"))],
)
def test_parse_header(text, parsed):
    assert parse_header(text) == parsed


@pytest.mark.parametrize("text", ["no colon", ": empty name", "two words: x"])
def test_parse_header_rejects(text):
    with pytest.raises(ValueError, match="Name: value"):
        parse_header(text)


def test_parse_header_rejects_a_value_that_would_split_the_request():
    with pytest.raises(ValueError, match="line break"):
        parse_header("X-Team: a\r\nInjected: 1")


def test_retry_after_seconds_and_dates():
    assert retry_after_seconds("3") == 3.0
    assert retry_after_seconds(None) is None and retry_after_seconds("soon") is None
    now = time.time()
    date = email.utils.formatdate(now + 5, usegmt=True)
    assert 3.5 <= retry_after_seconds(date, now=now) <= 5.0


async def test_headers_reach_every_request():
    seen = []

    def handler(request):
        seen.append((request.url.path, request.headers.get("authorization"), request.headers.get("x-org")))
        if request.url.path == "/v1/models":
            return httpx.Response(200, json={"data": [{"id": "m"}]})
        return httpx.Response(404)

    auth = ServerAuth(api_key="k1", headers={"X-Org": "acme"})
    async with make_http_client(auth) as http:
        http._transport = httpx.MockTransport(handler)  # the factory's headers, a fake network
        await probe_server("http://test", http)
    assert seen and all(auth_header == "Bearer k1" and org == "acme" for _, auth_header, org in seen)
    assert {path for path, _, _ in seen} == {"/v1/models", "/server_info"}


async def test_401_on_probe_names_the_fix():
    http = httpx.AsyncClient(
        transport=httpx.MockTransport(lambda r: httpx.Response(401, json={"error": "x"}))
    )
    with pytest.raises(UserError, match="HTTP 401.*--api-key.*RECALL_EVAL_API_KEY.*OPENAI_API_KEY"):
        await probe_server("http://test", http)


async def test_403_while_choosing_the_tokenizer_stops_instead_of_falling_back():
    """A key problem is not a reason to measure lengths another way: every candidate would be refused."""
    http = httpx.AsyncClient(
        transport=httpx.MockTransport(lambda r: httpx.Response(403, json={"error": "forbidden"}))
    )
    with pytest.raises(AuthFailed, match="HTTP 403.*rejected the API key.*--api-key"):
        await probe_tokenizer(Endpoint(base_url="http://test", model="m"), http)


async def test_retry_honours_retry_after_and_is_bounded():
    waits: list[float] = []
    calls = 0

    async def fake_sleep(seconds: float) -> None:
        waits.append(seconds)

    async def once():
        nonlocal calls
        calls += 1
        raise RequestFailed("server", "HTTP 429", 429, retry_after_s=7.0)

    policy = RetryPolicy(attempts=3, backoff_s=0.5, max_wait_s=30, jitter_s=0.5)
    with pytest.raises(RequestFailed) as info:
        await with_retries(once, policy, sleep=fake_sleep, draw=lambda: 0.5)
    assert calls == 3 and info.value.attempts == 3
    assert waits == [7.25, 7.25]  # Retry-After wins over the shorter backoff, plus its share of jitter


def test_retry_waits_double_are_capped_and_spread_by_jitter():
    policy = RetryPolicy(attempts=6, backoff_s=0.5, max_wait_s=3.0, jitter_s=0.5)
    assert [policy.wait_s(n, None, 0.0) for n in (1, 2, 3, 4)] == [0.5, 1.0, 2.0, 3.0]
    assert policy.wait_s(1, 60.0, 0.0) == 3.0  # a Retry-After past the cap is cut to it
    # requests that failed together come back spread over the jitter, not in lockstep
    spread = {policy.wait_s(2, None, draw) for draw in (0.0, 0.3, 0.99)}
    assert len(spread) == 3 and min(spread) == 1.0 and max(spread) < 1.5


async def test_retry_stops_when_give_up_says_so_and_spreads_concurrent_waits():
    waits: list[float] = []

    async def fake_sleep(seconds: float) -> None:
        waits.append(seconds)

    async def once():
        raise RequestFailed("server", "HTTP 503", 503)

    with pytest.raises(RequestFailed) as info:
        await with_retries(once, RetryPolicy(attempts=5), give_up=lambda: len(waits) >= 1, sleep=fake_sleep)
    assert info.value.attempts == 2 and len(waits) == 1
    waits.clear()
    for _ in range(8):  # eight requests failing at once, with the real random draw
        with pytest.raises(RequestFailed):
            await with_retries(once, RetryPolicy(attempts=2), sleep=fake_sleep)
    assert len(set(waits)) == 8  # each its own wait


@pytest.mark.parametrize(
    ("status", "retried"), [(429, True), (502, True), (503, True), (504, True), (500, False)]
)
async def test_which_statuses_are_retried(status, retried):
    calls = 0

    def handler(request):
        nonlocal calls
        calls += 1
        return httpx.Response(status, json={"error": {"message": "nope"}})

    client = ChatClient(
        Endpoint(base_url="http://test", model="m"),
        httpx.AsyncClient(transport=httpx.MockTransport(handler)),
        request_timeout_s=5,
        retries=2,
        backoff_s=0.001,
    )
    with pytest.raises(RequestFailed):
        await client.complete(MESSAGES, 2)
    assert calls == (3 if retried else 1)


async def test_401_mid_run_is_an_auth_failure_not_retried():
    calls = 0

    def handler(request):
        nonlocal calls
        calls += 1
        return httpx.Response(403, json={"error": {"message": "forbidden"}})

    client = ChatClient(
        Endpoint(base_url="http://test", model="m"),
        httpx.AsyncClient(transport=httpx.MockTransport(handler)),
        request_timeout_s=5,
        backoff_s=0.001,
    )
    with pytest.raises(RequestFailed) as info:
        await client.complete(MESSAGES, 2)
    assert info.value.kind == "auth" and calls == 1 and "--api-key" in str(info.value)


def test_timeouts_for_total():
    assert Timeouts.for_total(600) == Timeouts(connect_s=10, first_token_s=600, idle_s=60, total_s=600)
    assert Timeouts.for_total(15).idle_s == 3


async def test_first_token_limit_cuts_a_silent_server():
    async def handler(request):
        await asyncio.sleep(5)
        return httpx.Response(200)

    client = ChatClient(
        Endpoint(base_url="http://test", model="m"),
        httpx.AsyncClient(transport=httpx.MockTransport(handler)),
        request_timeout_s=10,
        timeouts=Timeouts(connect_s=1, first_token_s=0.2, idle_s=0.2, total_s=10),
    )
    started = time.perf_counter()
    with pytest.raises(RequestFailed) as info:
        await client.complete(MESSAGES, 2)
    assert info.value.kind == "timeout" and "first token" in str(info.value)
    assert time.perf_counter() - started < 2
