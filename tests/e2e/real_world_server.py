"""An OpenAI-style server that behaves the way real deployments, gateways and hosted APIs do
(python tests/e2e/real_world_server.py PORT [options]); each option turns on one such behaviour.

  --prefix /api              every route under a gateway prefix (/api/v1/chat/completions, ...)
  --no-models                /v1/models answers 404 (the user must give --model)
  --tokenize                 offer SGLang's /v1/tokenize (else lengths are measured through usage)
  --usage tracks|constant    usage.prompt_tokens: the prompt's word count, or always 4242 (a gateway's)
  --rate-limit-every N       every Nth counting request (non-streamed, max_tokens 1) answers 429
                             with Retry-After: 1, all through the length calibration
  --rate-limit-after N       every counting request after the Nth answers 429 (Retry-After: 1)
  --context N                a prompt over N tokens answers 400 "... longer than the model's context
                             length" (the vLLM wording)
  --advertise-context        /v1/models says max_model_len: the --context N (vLLM's model card)
  --cut-answers              a prompt that fits --context N but not with its max_tokens is answered, its
                             answer cut where the context ends (finish_reason length), as llama.cpp does
  --extras-tokenize          offer llama-cpp-python's /extras/tokenize ({"input": text} -> BOS + one token
                             per word); it has no chat-template endpoint
  --no-stream-usage          never send usage in a stream, even when asked (llama-cpp-python, llama.cpp)
  --coarse-chats Q           a chat of several messages counts in whole steps of Q tokens (rounded up), in
                             /v1/tokenize and usage alike: no filler size lands within ±1% of most targets
  --chatty                   answer "The code is CODE and that is all." (8 words) in one chunk
  --reject-stream-options    a body with stream_options answers 400 naming it (older vLLM, gateways)
  --json-only                ignores stream: true and answers one chat.completion JSON body
  --reason-words N           streams N words of reasoning_content before the answer; max_tokens covers
                             reasoning and answer (one word = one token), as on SGLang and vLLM
  --basic USER:PASS          every route requires HTTP Basic auth with these credentials
  --moved-to /new            every route lives under /new; the old ones (/v1/...) answer 307 there
  --certfile F --keyfile F   serve https

Tokens are whitespace-separated words of the messages, plus 2 per message. The answer is the first
code (LETTERS-DIGITS-LETTERS) of the last message. GET /ready (no prefix, no auth) says it is up;
GET /seen (no prefix, no auth) lists what each chat request carried.
"""

from __future__ import annotations

import argparse
import base64
import json
import re
import sys

import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, RedirectResponse, Response, StreamingResponse

CODE = re.compile(r"[A-Z]+-\d+-[A-Z]+")
CONSTANT_USAGE = 4242
REASONING = "considering whether the passage mentioned the requested identifier somewhere earlier "


def build_app(opts: argparse.Namespace) -> FastAPI:
    app = FastAPI()
    seen: list[dict] = []
    counts = {"counting": 0, "rate_limited": 0}
    prefix = (opts.moved_to or opts.prefix).rstrip("/")

    def tokens_of(messages: list[dict]) -> int:
        tokens = sum(len(str(m.get("content", "")).split()) + 2 for m in messages)
        if opts.coarse_chats and len(messages) > 1:
            return -(-tokens // opts.coarse_chats) * opts.coarse_chats
        return tokens

    def refused(request: Request) -> Response | None:
        if not opts.basic:
            return None
        expected = "Basic " + base64.b64encode(opts.basic.encode()).decode()
        if request.headers.get("authorization") != expected:
            return JSONResponse({"error": {"message": "unauthorized"}}, status_code=401)
        return None

    @app.get("/ready")
    async def ready() -> dict:
        return {"ok": True}

    @app.get("/seen")
    async def requests_seen() -> list[dict]:
        return seen

    if opts.moved_to:

        @app.api_route("/v1/{rest:path}", methods=["GET", "POST"])
        async def moved(rest: str, request: Request) -> Response:
            body = await request.json() if request.method == "POST" else {}
            seen.append(
                {"redirected": request.method, "path": request.url.path, "stream": body.get("stream")}
            )
            return RedirectResponse(f"{prefix}/v1/{rest}", status_code=307)

    @app.get(f"{prefix}/v1/models")
    async def models(request: Request) -> Response:
        if (denied := refused(request)) is not None:
            return denied
        if opts.no_models:
            return JSONResponse({"detail": "Not Found"}, status_code=404)
        card = {"id": "real-world", "object": "model"}
        if opts.advertise_context:
            card["max_model_len"] = opts.context
        return JSONResponse({"object": "list", "data": [card]})

    @app.post(f"{prefix}/v1/tokenize")
    async def tokenize(request: Request) -> Response:
        if (denied := refused(request)) is not None:
            return denied
        if not opts.tokenize:
            return JSONResponse({"detail": "Not Found"}, status_code=404)
        body = await request.json()
        return JSONResponse({"tokens": list(range(tokens_of(body["messages"])))})

    @app.post(f"{prefix}/extras/tokenize")
    async def extras_tokenize(request: Request) -> Response:
        if not opts.extras_tokenize:
            return JSONResponse({"detail": "Not Found"}, status_code=404)
        body = await request.json()
        return JSONResponse({"tokens": [1] + list(range(2, 2 + len(str(body["input"]).split())))})

    @app.post(f"{prefix}/v1/chat/completions")
    async def chat(request: Request) -> Response:
        if (denied := refused(request)) is not None:
            return denied
        body = await request.json()
        prompt_tokens = tokens_of(body["messages"])
        counting = body.get("max_tokens") == 1 and not body.get("stream")
        seen.append(
            {
                "counting": counting,
                "keys": sorted(body),
                "chat_template_kwargs": body.get("chat_template_kwargs"),
                "max_tokens": body.get("max_tokens"),
                "authorization": request.headers.get("authorization", ""),
            }
        )
        if counting:
            counts["counting"] += 1
        every = opts.rate_limit_every and counts["counting"] % opts.rate_limit_every == 0
        after = opts.rate_limit_after and counts["counting"] > opts.rate_limit_after
        if counting and (every or after):
            counts["rate_limited"] += 1
            seen[-1]["answered"] = 429
            return JSONResponse(
                {"error": {"message": "Rate limit reached, retry later"}},
                status_code=429,
                headers={"Retry-After": "1"},
            )
        if opts.context and prompt_tokens > opts.context:
            message = (
                f"This model's maximum context length is {opts.context} tokens. However, you requested "
                f"{prompt_tokens} tokens. The input ({prompt_tokens} tokens) is longer than the model's "
                "context length."
            )
            return JSONResponse({"error": {"message": message, "type": "BadRequestError"}}, status_code=400)
        if opts.reject_stream_options and "stream_options" in body:
            return JSONResponse(
                {"error": {"message": "Unrecognized request argument supplied: stream_options"}},
                status_code=400,
            )
        usage_prompt = CONSTANT_USAGE if opts.usage == "constant" else prompt_tokens
        found = CODE.search(str(body["messages"][-1]["content"]))
        answer = found.group() if found else "none"
        if opts.chatty:
            answer = f"The code is {answer} and that is all."
        budget = int(body.get("max_tokens") or 16)
        words = [("reasoning_content", word + " ") for word in (REASONING.split() * opts.reason_words)][
            : opts.reason_words
        ]
        if opts.cut_answers and opts.context:  # the answer ends where the context does
            budget = min(budget, max(0, opts.context - prompt_tokens))
        pieces = (words + [("content", answer)])[:budget]
        finish = "length" if budget < len(words) + 1 else "stop"
        usage = {"prompt_tokens": usage_prompt, "completion_tokens": len(pieces)}
        if opts.chatty:
            usage["completion_tokens"] = len(answer.split())
        if counting or opts.json_only or not body.get("stream"):
            message: dict = {"role": "assistant", "content": "".join(t for k, t in pieces if k == "content")}
            reasoning = "".join(t for k, t in pieces if k == "reasoning_content")
            if reasoning:
                message["reasoning_content"] = reasoning
            completion = {
                "id": "cmpl-1",
                "object": "chat.completion",
                "choices": [{"index": 0, "message": message, "finish_reason": finish}],
                "usage": usage,
            }
            return JSONResponse(completion)

        def event(delta: dict, finish_reason: str | None = None) -> str:
            choice = {"index": 0, "delta": delta, "finish_reason": finish_reason}
            return f"data: {json.dumps({'choices': [choice]})}\n\n"

        async def stream():
            batch: list[str] = []
            for kind, text in pieces:  # reasoning words go 50 to a chunk, as a fast server's would
                if kind == "reasoning_content":
                    batch.append(text)
                    if len(batch) == 50:
                        yield event({kind: "".join(batch)})
                        batch = []
                    continue
                if batch:
                    yield event({"reasoning_content": "".join(batch)})
                    batch = []
                yield event({kind: text})
            if batch:
                yield event({"reasoning_content": "".join(batch)})
            yield event({}, finish)
            if (body.get("stream_options") or {}).get("include_usage") and not opts.no_stream_usage:
                yield f"data: {json.dumps({'choices': [], 'usage': usage})}\n\n"
            yield "data: [DONE]\n\n"

        return StreamingResponse(stream(), media_type="text/event-stream")

    return app


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    parser.add_argument("port", type=int)
    parser.add_argument("--prefix", default="")
    parser.add_argument("--no-models", action="store_true")
    parser.add_argument("--tokenize", action="store_true")
    parser.add_argument("--usage", choices=("tracks", "constant"), default="tracks")
    parser.add_argument("--rate-limit-every", type=int, default=0)
    parser.add_argument("--rate-limit-after", type=int, default=0)
    parser.add_argument("--context", type=int, default=0)
    parser.add_argument("--advertise-context", action="store_true")
    parser.add_argument("--extras-tokenize", action="store_true")
    parser.add_argument("--no-stream-usage", action="store_true")
    parser.add_argument("--chatty", action="store_true")
    parser.add_argument("--coarse-chats", type=int, default=0)
    parser.add_argument("--cut-answers", action="store_true")
    parser.add_argument("--reject-stream-options", action="store_true")
    parser.add_argument("--json-only", action="store_true")
    parser.add_argument("--reason-words", type=int, default=0)
    parser.add_argument("--basic", default="")
    parser.add_argument("--moved-to", default="")
    parser.add_argument("--certfile")
    parser.add_argument("--keyfile")
    return parser.parse_args(argv)


if __name__ == "__main__":
    options = parse(sys.argv[1:])
    uvicorn.run(
        build_app(options),
        host="127.0.0.1",
        port=options.port,
        log_level="warning",
        ssl_certfile=options.certfile,
        ssl_keyfile=options.keyfile,
    )
