"""A server whose recall falls above a fixed prompt length (python tests/e2e/cliff_server.py PORT CLIFF).

It answers the needle's code (the first ZEBRA-like code in the prompt) when the prompt is at most CLIFF
tokens long, and "I do not know" above: a sharp cliff at a length the test chooses. Its tokens are the
whitespace-separated words of the chat (stub_routes' /v1/tokenize), and the usage it reports counts the same,
so the harness can size prompts exactly in this server's tokens.
"""

from __future__ import annotations

import re
import sys

import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import StreamingResponse
from stub_routes import add_common_routes, chunk, usage_and_done

CODE = re.compile(r"[A-Z]+-\d+-[A-Z]+")
CLIFF = int(sys.argv[2]) if len(sys.argv) > 2 else 4000
app = FastAPI()
add_common_routes(app, "cliff", 1_000_000)


@app.post("/v1/chat/completions")
async def chat(request: Request) -> StreamingResponse:
    body = await request.json()
    text = " ".join(f"<{m['role']}> {m['content']}" for m in body["messages"]) + " <assistant>"
    tokens = len(text.split())  # as /v1/tokenize counts
    found = CODE.search(body["messages"][-1]["content"])
    answer = found.group() if found and tokens <= CLIFF else "I do not know"

    async def stream():
        for start in range(0, len(answer), 4):
            yield chunk({"content": answer[start : start + 4]})
        yield chunk({}, "stop")
        yield usage_and_done(tokens, -(-len(answer) // 4))

    return StreamingResponse(stream(), media_type="text/event-stream")


if __name__ == "__main__":
    uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[1]), log_level="warning")
