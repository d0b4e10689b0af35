"""Library options of issue 13 (unit level): auth is used and only described in the spec, knobs parsed
once, thinking runs get their budget, replicas from --base-url, resume keeps the stored knobs; and the
vLLM tokenizer's request shape (the real vLLM needs CUDA: its endpoint is faked here, one function)."""

from __future__ import annotations

import json

import httpx
import pytest

from recall_eval import api
from recall_eval.api.sweeping import build_spec, external_profile, resume_options
from recall_eval.errors import BadInput
from recall_eval.thinking import THINKING_MAX_TOKENS
from recall_eval.tokenization import VLLM_TOKENIZER_NAME, probe_tokenizer
from recall_eval.types import ChatMessage, Endpoint


def test_spec_records_header_names_and_key_use_never_values(monkeypatch):
    monkeypatch.delenv("RECALL_EVAL_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    request = api.RequestOptions(api_key="sk-value-123", headers=["X-Org: acme-secret"])
    spec = build_spec(api.GridOptions(lengths="1000", depths="50"), request)
    assert spec.api_key_used and spec.header_names == ("X-Org",)
    assert "sk-value-123" not in spec.model_dump_json() and "acme-secret" not in spec.model_dump_json()
    monkeypatch.setenv("OPENAI_API_KEY", "from-env")
    assert build_spec(api.GridOptions(lengths="1000", depths="50"), api.RequestOptions()).api_key_used


def test_knobs_are_parsed_and_thinking_gets_its_budget():
    grid = api.GridOptions(lengths="1000", depths="50")
    thinking = build_spec(
        grid, api.RequestOptions(chat_template_kwargs='{"thinking": true}', extra_body={"a": 1})
    )
    assert thinking.chat_template_kwargs == {"thinking": True} and thinking.extra_body == {"a": 1}
    assert thinking.max_tokens == THINKING_MAX_TOKENS
    given = build_spec(
        api.GridOptions(lengths="1000", depths="50", max_tokens=64),
        api.RequestOptions(reasoning_effort="high"),
    )
    assert given.max_tokens == 64 and given.reasoning_effort == "high"
    assert build_spec(grid, api.RequestOptions()).max_tokens == 32


def test_base_urls_become_replicas():
    profile = external_profile(["http://a:1/", "http://b:2,http://c:3"], "m")
    assert (profile.base_url, profile.replica_base_urls) == ("http://a:1", ("http://b:2", "http://c:3"))
    with pytest.raises(BadInput, match="names a replica twice"):
        external_profile(["http://a:1", "http://a:1/"], None)
    with pytest.raises(BadInput, match="write a URL"):
        external_profile(["http://a:1", "b:2"], None)


def test_resume_keeps_the_stored_knobs_but_takes_the_key():
    options = api.SweepOptions.of(api_key="k", headers=["X: y"], concurrency=2)
    resumed = resume_options(options)
    assert resumed.request.api_key == "k" and resumed.request.headers == ["X: y"]
    with pytest.raises(BadInput, match="--reasoning-effort"):
        resume_options(api.SweepOptions.of(reasoning_effort="high"))


async def test_vllm_tokenize_request_shape():
    bodies = []

    def handler(request):
        if request.url.path == "/tokenize":
            bodies.append(json.loads(request.content))
            return httpx.Response(200, json={"count": 5, "max_model_len": 4096, "tokens": [1, 2, 3, 4, 5]})
        return httpx.Response(404, json={"detail": "Not Found"})

    http = httpx.AsyncClient(transport=httpx.MockTransport(handler))
    tokenizer = await probe_tokenizer(Endpoint(base_url="http://vllm", model="m"), http)
    assert tokenizer.name == VLLM_TOKENIZER_NAME
    assert await tokenizer.count_messages((ChatMessage(role="user", content="hi"),)) == 5
    assert bodies[-1] == {
        "model": "m",
        "messages": [{"role": "user", "content": "hi"}],
        "add_generation_prompt": True,
    }
