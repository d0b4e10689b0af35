"""An OpenAI-style test server that says as much or as little about itself as a real one does
(python tests/e2e/self_describing_server.py PORT MODE).

MODE `bare`: no /server_info (404), like vLLM or a hosted endpoint: a run can learn no precision, no
index_topk. MODE `sglang`: an SGLang-shaped /server_info: its flattened server args (with `api_key` and
`launch_command`, which must never be stored), `json_model_override_args` carrying `index_topk`, the
`index_k_dtype` the bundled bf16 index-K patch runs with, and the per-scheduler `internal_states` list.
Answers write the needle's code the way models do: with U+2011 non-breaking hyphens, after a short
sentence. /v1/tokenize counts whitespace-split words, so calibration works.
"""

from __future__ import annotations

import json
import re
import sys

import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse

CODE = re.compile(r"[A-Z]+-\d+-[A-Z]+")
SECRET = "sk-self-describing-secret-0042"
SGLANG_INFO = {
    "model_path": "deepseek-ai/DeepSeek-V4-Flash",
    "served_model_name": "dsv4",
    "tp_size": 8,
    "dp_size": 1,
    "host": "0.0.0.0",
    "port": 30000,
    "mem_fraction_static": 0.82,
    "context_length": 100000,
    "page_size": 64,
    "json_model_override_args": json.dumps({"index_topk": 1024}),
    "index_k_dtype": "bf16",
    "api_key": SECRET,
    "launch_command": f"python -m sglang.launch_server --api-key {SECRET}",
    "version": "0.5.23",
    "internal_states": [{"last_gen_throughput": 61.2, "memory_usage": {"kvcache": 12.5}}],
}
app = FastAPI()
MODE = {"value": "bare"}


@app.get("/v1/models")
async def models() -> dict:
    return {"object": "list", "data": [{"id": "dsv4", "object": "model", "max_model_len": 100000}]}


@app.get("/server_info")
async def server_info() -> Response:
    if MODE["value"] != "sglang":
        return JSONResponse({"detail": "Not Found"}, 404)
    return JSONResponse(SGLANG_INFO)


@app.post("/v1/tokenize")
async def tokenize(request: Request) -> dict:
    body = await request.json()
    text = " ".join(f"<{m['role']}> {m['content']}" for m in body["messages"]) + " <assistant>"
    return {"tokens": list(range(len(text.split()))), "count": len(text.split())}


def _event(content: str, finish: str | None = None) -> bytes:
    chunk = {"choices": [{"index": 0, "delta": {"content": content}, "finish_reason": finish}]}
    return f"data: {json.dumps(chunk)}\n\n".encode()


@app.post("/v1/chat/completions")
async def chat(request: Request) -> Response:
    body = await request.json()
    prompt = body["messages"][-1]["content"]
    found = CODE.search(" ".join(m["content"] for m in body["messages"]))
    code = found.group().replace("-", "\u2011") if found else "none"

    async def stream():
        for piece in ("The code is ", code, "."):
            yield _event(piece)
        yield _event("", "stop")
        usage = {"prompt_tokens": len(prompt.split()), "completion_tokens": 3}
        yield f"data: {json.dumps({'choices': [], 'usage': usage})}\n\n".encode()
        yield b"data: [DONE]\n\n"

    return StreamingResponse(stream(), media_type="text/event-stream")


if __name__ == "__main__":
    MODE["value"] = sys.argv[2]
    uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[1]), log_level="warning")
