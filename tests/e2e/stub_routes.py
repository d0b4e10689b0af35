"""What the scripted test servers (scripted_server.py, thinking_server.py) share: the model list, a
/v1/tokenize that counts whitespace-separated words, and the SSE lines of a streamed chat completion.

Each server runs as its own process (`python tests/e2e/<server>.py PORT ...`), so Python puts this folder
first on sys.path and they import this module as a sibling file, with no package set-up."""

from __future__ import annotations

import json

from fastapi import FastAPI, Request


def add_common_routes(app: FastAPI, model_id: str, max_model_len: int) -> None:
    """GET /v1/models naming one model, and POST /v1/tokenize counting the chat's words (plus role markers),
    so prompt lengths are measured without a model."""

    @app.get("/v1/models")
    async def models() -> dict:
        return {
            "object": "list",
            "data": [{"id": model_id, "object": "model", "max_model_len": max_model_len}],
        }

    @app.post("/v1/tokenize")
    async def tokenize(request: Request) -> dict:
        body = await request.json()
        text = " ".join(f"<{m['role']}> {m['content']}" for m in body["messages"]) + " <assistant>"
        return {"tokens": [hash(word) % 50000 for word in text.split()]}


def chunk(delta: dict, finish: str | None = None) -> str:
    """One streamed choice delta as an SSE line."""
    return f"data: {json.dumps({'choices': [{'index': 0, 'delta': delta, 'finish_reason': finish}]})}\n\n"


def usage_and_done(prompt_tokens: int, completion_tokens: int) -> str:
    """The closing SSE lines: the usage chunk (no choices) and [DONE]."""
    usage = {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens}
    return f"data: {json.dumps({'choices': [], 'usage': usage})}\n\ndata: [DONE]\n\n"
