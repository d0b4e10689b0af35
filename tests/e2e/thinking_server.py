"""A thinking model's server, as SGLang/vLLM serve one with a reasoning parser
(python tests/e2e/thinking_server.py PORT).

It thinks (streams `reasoning_content`, one token per chunk) for THINK_TOKENS tokens when the request
turns thinking on (chat_template_kwargs.thinking / enable_thinking, or any reasoning_effort), then
answers with the first code in the prompt as `content`. max_tokens covers reasoning plus answer, as on
those servers: a budget spent inside the reasoning ends with finish_reason "length" and no content.
GET /seen lists the knobs of every chat request it got.
"""

from __future__ import annotations

import re
import sys

import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import StreamingResponse
from stub_routes import add_common_routes, chunk, usage_and_done

THINK_TOKENS = 60
CODE = re.compile(r"[A-Z]+-\d+-[A-Z]+")
app = FastAPI()
add_common_routes(app, "thinker", 100_000)
seen: list[dict] = []


@app.get("/seen")
async def requests_seen() -> list[dict]:
    return seen


@app.post("/v1/chat/completions")
async def chat(request: Request) -> StreamingResponse:
    body = await request.json()
    kwargs = body.get("chat_template_kwargs") or {}
    seen.append({"reasoning_effort": body.get("reasoning_effort"), "chat_template_kwargs": kwargs})
    thinking = bool(kwargs.get("thinking") or kwargs.get("enable_thinking") or body.get("reasoning_effort"))
    found = CODE.search(body["messages"][-1]["content"])
    answer = [found.group() if found else "none"]
    tokens = [("reasoning_content", "hmm ")] * (THINK_TOKENS if thinking else 0) + [
        ("content", a) for a in answer
    ]
    budget = int(body.get("max_tokens") or 16)

    async def stream():
        for kind, text in tokens[:budget]:
            yield chunk({kind: text})
        yield chunk({}, "length" if budget < len(tokens) else "stop")
        yield usage_and_done(10, min(budget, len(tokens)))

    return StreamingResponse(stream(), media_type="text/event-stream")


if __name__ == "__main__":
    uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[1]), log_level="warning")
