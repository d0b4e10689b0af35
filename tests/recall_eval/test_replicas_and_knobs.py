"""Replicas (one variant over several real server processes), request knobs in the body, and a
budget spent on reasoning reported as such."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import httpx
import pytest

from recall_eval.chat_client import ChatClient
from recall_eval.connect import probe_replicas
from recall_eval.errors import BadInput
from recall_eval.runner import Replica, Runner, RunnerSettings
from recall_eval.scoring import REASONING_RAN_OUT, score_completion
from recall_eval.store import RunStore
from recall_eval.thinking import THINKING_MAX_TOKENS, is_thinking_run
from recall_eval.types import Case, ChatMessage, Completion, Endpoint, RequestSettings, Run, RunSpec
from tests.e2e.served_process import free_port, start_served

HERE = Path(__file__).parent
HOSTILE = HERE.parent / "e2e" / "hostile_server.py"


def _start(script: Path, tmp_path: Path, name: str):
    port = free_port()
    return start_served([sys.executable, str(script), str(port)], tmp_path / f"{name}.log", port)


@pytest.fixture
def two_tiny(tmp_path):
    servers = [_start(HERE / "tiny_server.py", tmp_path, f"tiny{i}") for i in range(2)]
    yield servers
    for server in servers:
        server.stop()


def _case(index: int) -> Case:
    code = f"ZEBRA-{index}-OMEGA"
    return Case(
        id=f"c{index}", suite="needle", messages=(ChatMessage(role="user", content=f"The code is {code}."),),
        expected=(code,), target_tokens=100, depth_percent=0.0, seed=0, prompt_tokens=100,
    )  # fmt: skip


async def test_cases_spread_over_replicas_each_recorded_once(two_tiny, tmp_path):
    store = RunStore.create(
        Run(run_id="r", spec=RunSpec(lengths=(100,), depths=(0.0,)), created_at=time.time()), tmp_path
    )
    async with httpx.AsyncClient() as http:
        replicas = [
            Replica(ChatClient(Endpoint(base_url=s.base_url, model="tiny"), http, request_timeout_s=10), 2)
            for s in two_tiny
        ]
        cases = [_case(i) for i in range(12)]
        appended = await Runner(store, replicas[0].client, RunnerSettings(), replicas=replicas).run(cases)
    results = store.results()
    assert appended == 12 and sorted(r.case_id for r in results) == sorted(c.id for c in cases)
    served = {r.endpoint for r in results}
    assert served == {s.base_url for s in two_tiny}  # both replicas served cases
    assert all(r.outcome == "pass" for r in results)


async def test_replicas_must_serve_the_same_model(two_tiny, tmp_path):
    hostile = _start(HOSTILE, tmp_path, "hostile")
    try:
        async with httpx.AsyncClient() as http:
            same = await probe_replicas([s.base_url for s in two_tiny], http, None)
            assert [f.model for f in same] == ["tiny", "tiny"]
            with pytest.raises(BadInput, match="must serve the same model"):
                await probe_replicas([two_tiny[0].base_url, hostile.base_url], http, None)
    finally:
        hostile.stop()


async def test_knobs_reach_the_request_body():
    bodies = []

    def handler(request):
        bodies.append(json.loads(request.content))
        return httpx.Response(
            200, content=b'data: {"choices":[{"delta":{"content":"x"},"finish_reason":"stop"}]}\n\n'
        )

    knobs = RequestSettings(
        reasoning_effort="high",
        chat_template_kwargs={"thinking": True},
        extra_body={"top_k": 1, "temperature": 0.6},
    )
    http = httpx.AsyncClient(transport=httpx.MockTransport(handler))
    client = ChatClient(Endpoint(base_url="http://t", model="m"), http, request_timeout_s=5, knobs=knobs)
    await client.complete((ChatMessage(role="user", content="q"),), 8)
    body = bodies[0]
    assert body["reasoning_effort"] == "high" and body["chat_template_kwargs"] == {"thinking": True}
    assert body["top_k"] == 1 and body["temperature"] == 0.6  # extra body wins over the defaults
    assert body["stream_options"] == {"include_usage": True}


def test_budget_spent_reasoning_is_truncated_with_its_own_detail():
    thinking = Completion(
        text="", reasoning="Let me scan the document for", finish_reason="length", completion_tokens=32
    )
    scored = score_completion(thinking, ("ZEBRA-1",))
    assert scored.outcome == scored.strict_outcome == "truncated"
    assert REASONING_RAN_OUT in scored.why and "32 tokens" in scored.why
    plain = score_completion(Completion(text="The code is", finish_reason="length"), ("ZEBRA-1",))
    assert (plain.outcome, plain.why) == (
        "truncated",
        "answer budget (max_tokens) ran out before the value appeared",
    )


def test_thinking_runs_are_recognised():
    base = RunSpec(lengths=(100,), depths=(0.0,))
    assert not is_thinking_run(base)
    assert is_thinking_run(base.model_copy(update={"reasoning_effort": "high"}))
    assert is_thinking_run(base.model_copy(update={"chat_template_kwargs": {"thinking": True}}))
    assert not is_thinking_run(base.model_copy(update={"chat_template_kwargs": {"thinking": False}}))
    assert THINKING_MAX_TOKENS >= 1024
