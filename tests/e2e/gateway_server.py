"""A server that fails the way gateways, proxies and dying servers do, before or during a run
(python tests/e2e/gateway_server.py PORT [options]); each option turns on one such behaviour.

  --models-status N          GET /v1/models answers status N with the body of --models-body
  --models-body KIND         nginx: nginx's HTML 502 page (11 lines); litellm: LiteLLM's JSON refusal of a
                             bad key; squid: a proxy's HTML 407 page; text: two lines of plain text
  --card JSON                fields merged into the one model card (e.g. '{"max_input_tokens": 500}')
  --die-after N              the process exits (os._exit) right after answering its Nth chat request
                             (or on the next request, if that comes first): from then on every
                             connection is refused
  --answer-delay S           each chat answer starts after S seconds (a run that is slow to finish)
  --hang                     no HTTP at all: connections are accepted (one line each on stdout) and
                             never answered

Otherwise it is a plain OpenAI-style server: /v1/tokenize counts whitespace-separated words (plus role
markers), and a chat answer is the first code (LETTERS-DIGITS-LETTERS) of the last message.
GET /ready (always 200 unless --hang) says it is up.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import sys

import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import HTMLResponse, JSONResponse, PlainTextResponse, Response, StreamingResponse

CODE = re.compile(r"[A-Z]+-\d+-[A-Z]+")
# nginx's own 502 page, as a reverse proxy serves it when the upstream is down
NGINX_502 = """<html>
<head><title>502 Bad Gateway</title></head>
<body>
<center><h1>502 Bad Gateway</h1></center>
<hr><center>nginx/1.24.0</center>
</body>
</html>
<!-- a padding to disable MSIE and Chrome friendly error page -->
<!-- a padding to disable MSIE and Chrome friendly error page -->
<!-- a padding to disable MSIE and Chrome friendly error page -->
<!-- a padding to disable MSIE and Chrome friendly error page -->
"""
SQUID_407 = """<!DOCTYPE html>
<html><head>
<meta type="copyright" content="Copyright (C) 1996-2023 The Squid Software Foundation and contributors">
<meta http-equiv="Content-Type" CONTENT="text/html; charset=utf-8">
<title>ERROR: Cache Access Denied</title>
</head><body id="ERR_CACHE_ACCESS_DENIED">
<h1>ERROR</h1>
<h2>Cache Access Denied.</h2>
<p>Sorry, you are not currently allowed to request this from this cache until you have authenticated yourself.</p>
</body></html>
"""
LITELLM_BAD_KEY = {
    "error": {
        "message": "Authentication Error, Invalid proxy server token passed. Received API Key = {key}",
        "type": "auth_error",
        "param": "None",
        "code": "400",
    }
}


def models_refusal(status: int, kind: str, key: str = "") -> Response:
    if kind == "nginx":
        return HTMLResponse(NGINX_502, status_code=status)
    if kind == "squid":
        return HTMLResponse(
            SQUID_407, status_code=status, headers={"Proxy-Authenticate": 'Basic realm="proxy"'}
        )
    if kind == "litellm":  # echoes the key it was given, as a careless gateway would
        error = {**LITELLM_BAD_KEY["error"], "message": LITELLM_BAD_KEY["error"]["message"].format(key=key)}
        return JSONResponse({"error": error}, status_code=status)
    return PlainTextResponse("upstream refused the request\nsecond line of detail", status_code=status)


def build_app(opts: argparse.Namespace) -> FastAPI:
    app = FastAPI()
    card = {"id": "gateway-model", "object": "model", **json.loads(opts.card or "{}")}
    answered = {"chat": 0}

    def tokens_of(messages: list[dict]) -> int:
        return sum(len(str(m.get("content", "")).split()) + 1 for m in messages) + 1

    @app.get("/ready")
    async def ready() -> dict:
        return {"ok": True}

    @app.get("/v1/models")
    async def models(request: Request) -> Response:
        if opts.models_status:
            key = request.headers.get("authorization", "").removeprefix("Bearer ")
            return models_refusal(opts.models_status, opts.models_body, key)
        return JSONResponse({"object": "list", "data": [card]})

    @app.post("/v1/tokenize")
    async def tokenize(request: Request) -> dict:
        body = await request.json()
        return {"tokens": list(range(tokens_of(body["messages"])))}

    @app.post("/v1/chat/completions")
    async def chat(request: Request) -> Response:
        if opts.die_after and answered["chat"] >= opts.die_after:  # a request after the last answer
            os._exit(0)
        body = await request.json()
        found = CODE.search(str(body["messages"][-1]["content"]))
        answer = found.group() if found else "none"
        usage = {"prompt_tokens": tokens_of(body["messages"]), "completion_tokens": 1}

        async def stream():
            await asyncio.sleep(opts.answer_delay)
            choice = {"index": 0, "delta": {"content": answer}, "finish_reason": "stop"}
            yield f"data: {json.dumps({'choices': [choice]})}\n\n"
            yield f"data: {json.dumps({'choices': [], 'usage': usage})}\n\n"
            yield "data: [DONE]\n\n"
            answered["chat"] += 1
            if opts.die_after and answered["chat"] >= opts.die_after:  # after this answer is out
                asyncio.get_running_loop().call_later(0.05, os._exit, 0)

        return StreamingResponse(stream(), media_type="text/event-stream")

    return app


async def hang(port: int) -> None:
    """Accept every connection and never answer (a server wedged after accept)."""
    held = []

    async def accept(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        held.append(writer)
        print(f"accepted connection {len(held)}", flush=True)  # the test counts the tries
        await asyncio.sleep(3600)

    server = await asyncio.start_server(accept, "127.0.0.1", port)
    async with server:
        await server.serve_forever()


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    parser.add_argument("port", type=int)
    parser.add_argument("--models-status", type=int, default=0)
    parser.add_argument("--models-body", choices=("nginx", "litellm", "squid", "text"), default="text")
    parser.add_argument("--card", default="")
    parser.add_argument("--die-after", type=int, default=0)
    parser.add_argument("--answer-delay", type=float, default=0.0)
    parser.add_argument("--hang", action="store_true")
    return parser.parse_args(argv)


if __name__ == "__main__":
    options = parse(sys.argv[1:])
    if options.hang:
        asyncio.run(hang(options.port))
    else:
        uvicorn.run(build_app(options), host="127.0.0.1", port=options.port, log_level="warning")
