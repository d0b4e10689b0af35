"""A misbehaving OpenAI-style server (python tests/e2e/hostile_server.py PORT).

Each new prompt it sees gets the next behaviour of BEHAVIOURS (retries of the same prompt keep
theirs; prompts past the list behave normally), so a sweep of at least len(BEHAVIOURS) cases meets
every one. GET /behaviours says which prompt got which (by the code in it). /v1/tokenize counts
whitespace-split words like SGLang's endpoint would count tokens, so calibration works.
"""

from __future__ import annotations

import asyncio
import json
import re
import sys

import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import HTMLResponse, JSONResponse, Response, StreamingResponse

CODE = re.compile(r"[A-Z]+-\d+-[A-Z]+")
BEHAVIOURS = (
    "script",  # answers a <script> tag: a miss, rendered escaped
    "surrogate",  # a lone surrogate escape ("\udcff") in a JSON string, then the code: a pass
    "bad_utf8",  # raw invalid UTF-8 bytes inside a chunk, then the code: a pass
    "malformed_json",  # a chunk that is not JSON: error
    "not_json",  # 200 with an HTML body, not an event stream: error
    "drop",  # one chunk, then the connection is cut: error (after retries)
    "e500",  # HTTP 500: error, not retried
    "e503",  # HTTP 503 every time: error after bounded retries
    "e429_then_ok",  # 429 with Retry-After: 1, then a normal answer: a pass
    "megabytes",  # 2 MB of content despite max_tokens: error, a bounded prefix stored
    "stall",  # one chunk, then silence for 60 s: timeout at the idle limit
    "error_event",  # an error event in the stream: error
)
app = FastAPI()
assigned: dict[str, str] = {}  # prompt -> behaviour
attempts: dict[str, int] = {}


@app.get("/v1/models")
async def models() -> dict:
    return {"object": "list", "data": [{"id": "hostile", "object": "model", "max_model_len": 100000}]}


@app.get("/behaviours")
async def behaviours() -> dict:
    return {
        CODE.search(prompt).group() if CODE.search(prompt) else prompt[:40]: b
        for prompt, b in assigned.items()
    }


@app.post("/v1/tokenize")
async def tokenize(request: Request) -> dict:
    body = await request.json()
    text = " ".join(f"<{m['role']}> {m['content']}" for m in body["messages"]) + " <assistant>"
    tokens = [hash(word) % 50000 for word in text.split()]
    return {"tokens": tokens, "count": len(tokens)}


def _event(content: str, finish: str | None = None) -> bytes:
    chunk = {"choices": [{"index": 0, "delta": {"content": content}, "finish_reason": finish}]}
    return f"data: {json.dumps(chunk)}\n\n".encode()


DONE = b"data: [DONE]\n\n"


@app.post("/v1/chat/completions")
async def chat(request: Request) -> Response:
    body = await request.json()
    prompt = body["messages"][-1]["content"]
    if prompt not in assigned:
        assigned[prompt] = BEHAVIOURS[len(assigned)] if len(assigned) < len(BEHAVIOURS) else "normal"
    behaviour = assigned[prompt]
    attempts[prompt] = attempts.get(prompt, 0) + 1
    found = CODE.search(prompt)
    code = found.group() if found else "none"

    if behaviour == "not_json":
        return HTMLResponse("<html><body>502 Bad Gateway from a proxy</body></html>")
    if behaviour == "e500":
        return JSONResponse({"error": {"message": "internal failure", "code": 500}}, 500)
    if behaviour == "e503":
        return JSONResponse({"error": {"message": "overloaded", "code": 503}}, 503)
    if behaviour == "e429_then_ok" and attempts[prompt] == 1:
        return JSONResponse({"error": {"message": "rate limited"}}, 429, headers={"Retry-After": "1"})

    async def stream():
        if behaviour == "script":
            yield _event("<script>alert('owned')</script>", "stop")
        elif behaviour == "surrogate":
            yield b'data: {"choices": [{"index": 0, "delta": {"content": "\\udcff "}, "finish_reason": null}]}\n\n'
            yield _event(code, "stop")
        elif behaviour == "bad_utf8":
            yield b'data: {"choices": [{"index": 0, "delta": {"content": "\xff\xfe\xc3 "}, "finish_reason": null}]}\n\n'
            yield _event(code, "stop")
        elif behaviour == "malformed_json":
            yield _event("The code")
            yield b'data: {"choices": [{"index": 0, "delta": {"content": \n\n'
        elif behaviour == "drop":
            yield _event("The co")
            raise RuntimeError("connection dropped on purpose")
        elif behaviour == "megabytes":
            for _ in range(2048):
                yield _event("x" * 1024)
            yield _event("", "stop")
        elif behaviour == "stall":
            yield _event("The")
            await asyncio.sleep(60)
            yield _event(code, "stop")
        elif behaviour == "error_event":
            yield _event("The")
            yield b'data: {"error": {"message": "Generation aborted.", "code": 503}}\n\n'
        else:
            yield _event(code, "stop")
        usage = {"prompt_tokens": len(prompt.split()), "completion_tokens": 1}
        yield f"data: {json.dumps({'choices': [], 'usage': usage})}\n\n".encode()
        yield DONE

    return StreamingResponse(stream(), media_type="text/event-stream")


if __name__ == "__main__":
    uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[1]), log_level="warning")
