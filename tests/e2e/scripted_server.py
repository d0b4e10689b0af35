"""A server that answers known predictions (python tests/e2e/scripted_server.py PORT ANSWERS_JSON).

ANSWERS_JSON maps a needle string to the answer to give: a chat request whose last user message
contains the needle gets that answer (streamed in pieces of 4 characters), any other gets "no idea".
An answer's `{max_tokens}` is replaced by the request's max_tokens (to check the budget each case is sent with).
Used to check that scores computed here equal a published metric's for the same predictions.
/v1/tokenize counts whitespace-separated words, so lengths are measured without a model.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import StreamingResponse
from stub_routes import add_common_routes, chunk, usage_and_done

app = FastAPI()
add_common_routes(app, "scripted", 1_000_000)
ANSWERS: dict[str, str] = json.loads(Path(sys.argv[2]).read_text()) if len(sys.argv) > 2 else {}


@app.post("/v1/chat/completions")
async def chat(request: Request) -> StreamingResponse:
    body = await request.json()
    last = body["messages"][-1]["content"]
    answer = next((text for needle, text in ANSWERS.items() if needle in last), "no idea")
    answer = answer.replace("{max_tokens}", str(body.get("max_tokens")))
    pieces = [answer[i : i + 4] for i in range(0, len(answer), 4)]

    async def stream():
        for piece in pieces:
            yield chunk({"content": piece})
        yield chunk({}, "stop")
        yield usage_and_done(len(last.split()), len(pieces))

    return StreamingResponse(stream(), media_type="text/event-stream")


if __name__ == "__main__":
    uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[1]), log_level="warning")
