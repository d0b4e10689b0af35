"""A server that answers wrongly above a length (python tests/e2e/degrading_proxy.py PORT UPSTREAM TOKENS).

It stands in front of a real server (UPSTREAM, e.g. the reference engine) and passes every request
through, except chat requests whose messages are longer than TOKENS tokens as UPSTREAM's own
/v1/tokenize counts them: those get a confident wrong answer (a key-shaped code no needle has),
streamed as an OpenAI server streams. So a candidate behaves exactly like its baseline up to a length
and loses recall beyond it: a kernel change that broke long-context retrieval, for the CI gate's tests.
TOKENS 0 answers every chat request wrongly.
"""

from __future__ import annotations

import json
import sys

import httpx
import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import Response, StreamingResponse

UPSTREAM = sys.argv[2].rstrip("/")
ABOVE = int(sys.argv[3])
WRONG = "ZZZZZ-0000-ZZZZZ"
app = FastAPI()
client = httpx.AsyncClient(base_url=UPSTREAM, timeout=httpx.Timeout(600.0))


async def _tokens(messages: list[dict]) -> int:
    answer = await client.post("/v1/tokenize", json={"messages": messages})
    answer.raise_for_status()
    return int(answer.json()["count"])


def _wrong_stream(prompt_tokens: int) -> StreamingResponse:
    def chunk(delta: dict, finish: str | None = None) -> str:
        body = {
            "object": "chat.completion.chunk",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }
        return f"data: {json.dumps(body)}\n\n"

    async def stream():
        for piece in (WRONG[i : i + 4] for i in range(0, len(WRONG), 4)):
            yield chunk({"content": piece})
        yield chunk({}, "stop")
        usage = {"prompt_tokens": prompt_tokens, "completion_tokens": 4, "total_tokens": prompt_tokens + 4}
        yield f"data: {json.dumps({'choices': [], 'usage': usage})}\n\n"
        yield "data: [DONE]\n\n"

    return StreamingResponse(stream(), media_type="text/event-stream")


@app.api_route("/{path:path}", methods=["GET", "POST"])
async def passthrough(path: str, request: Request) -> Response:
    raw = await request.body()
    if request.method == "POST" and path.rstrip("/").endswith("chat/completions"):
        body = json.loads(raw)
        count = await _tokens(body["messages"])
        if count > ABOVE:
            return _wrong_stream(count)
    headers = {k: v for k, v in request.headers.items() if k.lower() not in ("host", "content-length")}
    upstream = client.build_request(
        request.method, "/" + path, content=raw, headers=headers, params=request.query_params
    )
    answer = await client.send(upstream, stream=True)
    kept = {
        k: v
        for k, v in answer.headers.items()
        if k.lower() not in ("content-length", "transfer-encoding", "connection")
    }

    async def body_of():
        try:
            async for part in answer.aiter_raw():
                yield part
        finally:
            await answer.aclose()

    return StreamingResponse(body_of(), status_code=answer.status_code, headers=kept)


if __name__ == "__main__":
    uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[1]), log_level="warning")
