"""A tiny real OpenAI-style HTTP server for runner unit tests (python tests/recall_eval/tiny_server.py PORT).

It answers with the first ZEBRA-like code in the prompt, one character per SSE chunk, and obeys
directives in the prompt: "@die" exits the process mid-request (a crash), "@slow" sleeps 30 s,
"@e500" answers HTTP 500, "@long" answers 400 with SGLang's context-length message.
The end-to-end tests use the real reference server instead.
Started with a second argument `wrong` (python tiny_server.py PORT wrong) it answers every code
reversed: a server that misses every needle on purpose (a broken kernel, for the regression gate).
With `flaky N` it answers HTTP 503 to its first N chat requests, then as usual (a server under load).
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import sys

import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, StreamingResponse

CODE = re.compile(r"[A-Z]+-\d+-[A-Z]+")
WRONG = sys.argv[2:3] == ["wrong"]
FLAKY = {"left": int(sys.argv[3]) if sys.argv[2:3] == ["flaky"] else 0}  # 503s still to answer
app = FastAPI()


@app.get("/v1/models")
async def models() -> dict:
    return {"object": "list", "data": [{"id": "tiny", "object": "model", "max_model_len": 4096}]}


@app.post("/v1/tokenize")
async def tokenize(request: Request) -> dict:
    body = await request.json()
    text = "".join(f"<{m['role']}>{m['content']}" for m in body["messages"]) + "<assistant>"
    tokens = [hash(word) % 50000 for word in re.findall(r"\S+|\s", text)]
    return {"tokens": tokens, "count": len(tokens), "max_model_len": 4096}


@app.post("/v1/chat/completions")
async def chat(request: Request):
    body = await request.json()
    prompt = body["messages"][-1]["content"]
    if FLAKY["left"] > 0:
        FLAKY["left"] -= 1
        return JSONResponse({"object": "error", "message": "overloaded", "code": 503}, 503)
    if "@e500" in prompt:
        return JSONResponse(
            {"object": "error", "message": "boom", "type": "InternalServerError", "code": 500}, 500
        )
    if "@long" in prompt:
        message = "The input (9999 tokens) is longer than the model's context length (4096 tokens)."
        return JSONResponse(
            {"object": "error", "message": message, "type": "BadRequestError", "code": 400}, 400
        )
    found = CODE.search(prompt)
    answer = found.group() if found else "I do not know"
    if WRONG and found:
        answer = answer[::-1]

    async def stream():
        if "@die" in prompt:
            await asyncio.sleep(0.2)
            os._exit(3)
        if "@slow" in prompt:
            await asyncio.sleep(30)
        for char in answer:
            chunk = {"choices": [{"index": 0, "delta": {"content": char}, "finish_reason": None}]}
            yield f"data: {json.dumps(chunk)}\n\n"
        yield f"data: {json.dumps({'choices': [{'index': 0, 'delta': {}, 'finish_reason': 'stop'}]})}\n\n"
        usage = {"prompt_tokens": len(prompt.split()), "completion_tokens": len(answer), "total_tokens": 0}
        yield f"data: {json.dumps({'choices': [], 'usage': usage})}\n\n"
        yield "data: [DONE]\n\n"

    return StreamingResponse(stream(), media_type="text/event-stream")


if __name__ == "__main__":
    uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[1]), log_level="warning")
