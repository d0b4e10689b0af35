"""The reference server's response shapes equal what SGLang 0.5.23's own code builds.

Runs SGLang's protocol models and SSE builder (installed with --no-deps, see scripts/test.sh) on the
same inputs as the server's builders and compares the bytes or dicts.
"""

from __future__ import annotations

import json

import pytest

from launchers.reference import http_api as api

pytestmark = pytest.mark.sglang

TEXT = 'a "quoted"\nline with ünïcode and \\ backslash\t'


@pytest.fixture(scope="module")
def sglang_openai():  # noqa: ANN201 - SGLang's modules
    from sglang.srt.entrypoints.openai import protocol, sse_utils, usage_processor

    return protocol, sse_utils, usage_processor


def test_chat_chunks_are_byte_equal(sglang_openai) -> None:  # noqa: ANN001
    _, sse_utils, _ = sglang_openai
    build = sse_utils.build_sse_content
    assert api.chat_chunk("r1", 5, "m", role="assistant", content="") == build(
        "r1", 5, "m", 0, role="assistant", content=""
    )
    assert api.chat_chunk("r1", 5, "m", content=TEXT) == build("r1", 5, "m", 0, content=TEXT)
    assert api.chat_chunk("r1", 5, "m", finish_reason="stop", matched_stop=2) == build(
        "r1", 5, "m", 0, finish_reason="stop", matched_stop=2
    )
    assert api.chat_chunk("r1", 5, "m", finish_reason="length") == build(
        "r1", 5, "m", 0, finish_reason="length"
    )


def test_usage_chunk_is_byte_equal(sglang_openai) -> None:  # noqa: ANN001
    protocol, _, usage_processor = sglang_openai
    usage = usage_processor.UsageProcessor.calculate_token_usage(prompt_tokens=120, completion_tokens=7)
    assert api.usage_info(120, 7) == usage.model_dump()
    theirs = protocol.ChatCompletionStreamResponse(id="r1", created=5, model="m", choices=[], usage=usage)
    assert (
        api.chat_usage_chunk("r1", 5, "m", api.usage_info(120, 7)) == f"data: {theirs.model_dump_json()}\n\n"
    )


def test_chat_response_equals_sglang_model(sglang_openai) -> None:  # noqa: ANN001
    protocol, _, usage_processor = sglang_openai
    ours = api.chat_response("r1", "m", TEXT, "stop", 2, 120, 7)
    theirs = protocol.ChatCompletionResponse(
        id="r1",
        created=ours["created"],
        model="m",
        choices=[
            protocol.ChatCompletionResponseChoice(
                index=0,
                message=protocol.ChatMessage(role="assistant", content=TEXT),
                finish_reason="stop",
                matched_stop=2,
            )
        ],
        usage=usage_processor.UsageProcessor.calculate_token_usage(prompt_tokens=120, completion_tokens=7),
        metadata={"weight_version": "default"},
    )
    assert json.loads(json.dumps(ours)) == theirs.model_dump()


def test_models_errors_and_tokenize_equal_sglang_models(sglang_openai) -> None:  # noqa: ANN001
    protocol, _, _ = sglang_openai
    ours = api.model_list("ref", 8192, 1234)
    theirs = protocol.ModelList(
        data=[protocol.ModelCard(id="ref", root="ref", max_model_len=8192, created=1234)]
    )
    assert ours == theirs.model_dump()
    error = protocol.ErrorResponse(message="bad", type="BadRequestError", code=400)
    assert api.error_response_body("bad") == error.model_dump()
    protocol.TokenizeResponse.model_validate({"tokens": [1, 2], "count": 2, "max_model_len": 8192})
    with pytest.raises(ValueError, match="Exactly one of 'prompt' or 'messages' must be provided."):
        protocol.TokenizeRequest.model_validate({})
    with pytest.raises(ValueError, match="Exactly one of 'prompt' or 'messages' must be provided."):
        api.TokenizeRequest.model_validate({})
