"""The FastAPI app: SGLang 0.5.23's routes that recall-eval uses, served by the reference engine."""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import aclosing
from typing import Any

from fastapi import Depends, FastAPI, Request
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response, StreamingResponse
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException

from launchers.reference import http_api as api
from launchers.reference.generate_route import generate_response
from launchers.reference.memory_limit import data_segment_bytes
from launchers.reference.runtime import NotReady, Ready, Runtime
from launchers.reference.scheduler import GenerationJob
from launchers.reference.sglang_log import SERVER_LOGGER
from launchers.reference.text_stream import GenerationRecord, text_steps

HEALTH_CHECK_TIMEOUT_S = 20.0  # SGLang's default SGLANG_HEALTH_CHECK_TIMEOUT
_HEALTH_POLL_S = 0.05

logger = logging.getLogger(SERVER_LOGGER)


def openai_error(message: str, err_type: str = "BadRequestError", code: int = 400) -> JSONResponse:
    return JSONResponse(api.error_response_body(message, err_type, code), status_code=code)


async def require_json(request: Request) -> None:
    """SGLang's validate_json_request: OpenAI routes take application/json only."""
    media_type = request.headers.get("content-type", "").lower().split(";", maxsplit=1)[0]
    if media_type != "application/json":
        raise RequestValidationError(
            errors=[
                {
                    "loc": ["header", "content-type"],
                    "msg": "Unsupported Media Type: Only 'application/json' is allowed",
                    "type": "value_error",
                }
            ]
        )


async def consume_unless_disconnected(request: Request, steps: AsyncIterator[Any]) -> bool:
    """Drain steps; stop (and so cancel the generation) if the client goes away. True if drained."""

    async def drain() -> None:
        async with aclosing(steps) as it:
            async for _ in it:
                pass

    async def disconnected() -> None:
        while (await request.receive())["type"] != "http.disconnect":
            pass

    drain_task = asyncio.create_task(drain())
    watch_task = asyncio.create_task(disconnected())
    try:
        done, _ = await asyncio.wait({drain_task, watch_task}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        watch_task.cancel()
        if not drain_task.done():
            drain_task.cancel()
    if drain_task in done:
        drain_task.result()  # re-raise a generation error
        return True
    logger.info("Client disconnected; generation aborted.")
    return False


def create_app(runtime: Runtime) -> FastAPI:
    app = FastAPI(title="recall-eval reference DSA server (SGLang API)")
    if runtime.args.api_key:
        expected = f"Bearer {runtime.args.api_key}"

        @app.middleware("http")
        async def require_api_key(request: Request, call_next: Any) -> Any:
            # as SGLang's api-key middleware: health checks stay open
            if request.url.path.startswith("/health") or request.headers.get("authorization") == expected:
                return await call_next(request)
            return JSONResponse({"error": "Unauthorized"}, status_code=401)

    @app.exception_handler(NotReady)
    async def not_ready(_: Request, exc: NotReady) -> JSONResponse:
        return openai_error(str(exc), "ServiceUnavailable", 503)

    @app.exception_handler(HTTPException)
    async def http_error(_: Request, exc: HTTPException) -> JSONResponse:
        return JSONResponse(
            api.error_response_body(str(exc.detail), str(exc.status_code), exc.status_code),
            status_code=exc.status_code,
        )

    @app.exception_handler(RequestValidationError)
    async def validation_error(_: Request, exc: RequestValidationError) -> JSONResponse:
        # SGLang answers 400 (not FastAPI's 422) with the exception text and its error list.
        errors = jsonable_encoder(exc.errors())
        exc_str, errors_str = str(exc), str(errors)
        message = f"{exc_str} {errors_str}" if errors_str and errors_str != exc_str else exc_str
        return openai_error(message, "Bad Request", 400)

    @app.get("/health")
    async def health() -> Response:
        return Response(status_code=200)

    @app.get("/ready")
    async def ready_route() -> Response:
        return Response(status_code=200 if runtime.is_ready else 503)

    @app.get("/health_generate")
    async def health_generate() -> Response:
        if not runtime.is_ready:
            return Response(status_code=503)
        return Response(status_code=await _probe_generation(runtime.ready))

    @app.get("/v1/models")
    async def models() -> JSONResponse:
        ready = runtime.ready
        return JSONResponse(
            api.model_list(ready.served_model_name, ready.limits.context_len, int(runtime.started_at))
        )

    @app.get("/v1/models/{model:path}")
    async def model_card(model: str) -> JSONResponse:
        ready = runtime.ready
        if model != ready.served_model_name:
            body = {
                "error": {
                    "message": f"The model '{model}' does not exist",
                    "type": "invalid_request_error",
                    "param": "model",
                    "code": "model_not_found",
                }
            }
            return JSONResponse(body, status_code=404)
        listing = api.model_list(model, ready.limits.context_len, int(runtime.started_at))
        return JSONResponse(listing["data"][0])

    @app.get("/server_info")
    @app.get("/get_server_info")
    async def server_info() -> JSONResponse:
        ready = runtime.ready
        counters = ready.scheduler.counters()
        internal = {
            "#running-req": counters.running,
            "#queue-req": counters.queued,
            "generated_tokens_total": counters.generated_tokens,  # reference only
            "finished_requests_total": counters.finished,  # reference only
            "memory_in_use_bytes": data_segment_bytes(),  # reference only: VmData, what RLIMIT_DATA caps
        }
        free = getattr(ready.engine, "available_tokens", None)
        if callable(free):
            internal["free_kv_tokens"] = int(free())  # reference only: KV slots no request holds
        return JSONResponse({**ready.startup_info, "internal_states": [internal]})

    @app.get("/model_info")
    @app.get("/get_model_info")
    async def model_info() -> JSONResponse:
        ready = runtime.ready
        return JSONResponse(
            {
                "model_path": ready.startup_info["model_path"],
                "served_model_name": ready.served_model_name,
                "tokenizer_path": ready.startup_info["model_path"],
                "is_generation": True,
                "weight_version": api.WEIGHT_VERSION,
                "model_type": "reference_dsa",
            }
        )

    @app.post("/v1/tokenize", dependencies=[Depends(require_json)])
    @app.post("/tokenize", dependencies=[Depends(require_json)], include_in_schema=False)
    async def tokenize(body: api.TokenizeRequest) -> JSONResponse:
        ready = runtime.ready
        engine = ready.engine
        tokens: list[int] | list[list[int]]
        if body.messages is not None:
            add_gen = True if body.add_generation_prompt is None else body.add_generation_prompt
            roles = [{"role": m.role, "content": m.text()} for m in body.messages]
            tokens = await run_in_threadpool(engine.encode, engine.chat_prompt(roles, add_gen))
            count: int | list[int] = len(tokens)
        elif isinstance(body.prompt, str):
            tokens = await run_in_threadpool(engine.encode, body.prompt)
            count = len(tokens)
        else:
            tokens = [await run_in_threadpool(engine.encode, text) for text in body.prompt or []]
            count = [len(t) for t in tokens]
        return JSONResponse({"tokens": tokens, "count": count, "max_model_len": ready.limits.context_len})

    @app.post("/v1/detokenize", dependencies=[Depends(require_json)])
    @app.post("/detokenize", dependencies=[Depends(require_json)], include_in_schema=False)
    async def detokenize(body: api.DetokenizeRequest) -> JSONResponse:
        engine = runtime.ready.engine
        if body.tokens and isinstance(body.tokens[0], list):
            return JSONResponse({"text": [engine.decode(list(ids)) for ids in body.tokens]})  # type: ignore[arg-type]
        return JSONResponse({"text": engine.decode(list(body.tokens))})  # type: ignore[arg-type]

    @app.post("/v1/chat/completions", dependencies=[Depends(require_json)])
    async def chat_completions(body: api.ChatCompletionRequest, request: Request) -> Response:
        return await _chat(runtime.ready, body, request)

    @app.api_route("/generate", methods=["POST", "PUT"])
    async def generate(body: api.GenerateRequest, request: Request) -> Response:
        ready = runtime.ready
        allow_topk = runtime.args.enable_return_indexer_topk
        return await generate_response(ready, body, request, allow_topk, consume_unless_disconnected)

    return app


async def _probe_generation(ready: Ready) -> int:
    """SGLang's /health_generate: healthy as soon as any request (ours or another) yields a token."""
    tic = time.monotonic()

    async def one_token() -> None:
        async with aclosing(ready.scheduler.stream(GenerationJob([0], 1))) as steps:
            async for _ in steps:
                return

    task = asyncio.create_task(one_token())
    try:
        while time.monotonic() < tic + HEALTH_CHECK_TIMEOUT_S:
            await asyncio.sleep(_HEALTH_POLL_S)
            if ready.scheduler.last_step_monotonic > tic:
                return 200
            if task.done() and task.exception() is not None:
                break
    finally:
        task.cancel()
    logger.error(
        f"Health check failed. Server couldn't get a response from detokenizer for last "
        f"{HEALTH_CHECK_TIMEOUT_S:.0f} seconds."
    )
    return 503


async def _chat(ready: Ready, body: api.ChatCompletionRequest, request: Request) -> Response:
    if body.n != 1:
        return openai_error("n > 1 is not supported by the reference server (decoding is greedy).")
    wanted = body.max_new_tokens()
    if wanted is not None and wanted < 0:
        return openai_error(f"max_new_tokens must be at least 0, got {wanted}.")
    engine = ready.engine
    prompt_ids = await run_in_threadpool(engine.encode, engine.chat_prompt(body.role_dicts(), True))
    try:
        ready.limits.check_context(len(prompt_ids), wanted)
    except ValueError as exc:
        return openai_error(str(exc))
    abort = ready.limits.scheduler_abort(len(prompt_ids))
    job = GenerationJob(prompt_ids, ready.limits.clip_max_new_tokens(len(prompt_ids), wanted))
    stops = api.stop_strings(body.stop)
    rid = uuid.uuid4().hex
    if body.stream:
        return StreamingResponse(
            _chat_events(ready, body, job, stops, rid, abort), media_type="text/event-stream"
        )
    if abort is not None:
        return openai_error(abort)
    record = GenerationRecord()
    try:
        if not await consume_unless_disconnected(request, text_steps(ready.scheduler, job, stops, record)):
            return Response(status_code=499)
    except Exception as exc:  # noqa: BLE001 - an engine failure is the request's 500, not the server's
        logger.exception("Error in request")
        return openai_error(f"Internal server error: {exc}", "InternalServerError", 500)
    return JSONResponse(
        api.chat_response(
            rid,
            body.model,
            record.text,
            record.finish_reason or "length",
            record.matched_stop,
            len(prompt_ids),
            len(record.output_ids),
        )
    )


async def _chat_events(
    ready: Ready,
    body: api.ChatCompletionRequest,
    job: GenerationJob,
    stops: tuple[str, ...],
    rid: str,
    abort: str | None,
) -> AsyncIterator[str]:
    """serving_chat._generate_chat_stream: role chunk, content chunks, finish chunk, usage chunk, [DONE]."""
    created, model, prompt_tokens = int(time.time()), body.model, len(job.prompt_ids)
    options = body.stream_options
    include_usage = bool(options and options.include_usage)
    continuous = bool(options and options.continuous_usage_stats)
    record = GenerationRecord()
    if abort is not None:
        yield api.chat_stream_error(abort)
    else:
        try:
            first = True
            async with aclosing(text_steps(ready.scheduler, job, stops, record)) as steps:
                async for step in steps:
                    if first:
                        first = False
                        yield api.chat_chunk(rid, created, model, role="assistant", content="")
                    if step.delta:
                        usage = api.usage_info(prompt_tokens, len(record.output_ids)) if continuous else None
                        yield api.chat_chunk(rid, created, model, content=step.delta, usage=usage)
            if first:
                yield api.chat_chunk(rid, created, model, role="assistant", content="")
            yield api.chat_chunk(
                rid, created, model, finish_reason=record.finish_reason, matched_stop=record.matched_stop
            )
        except Exception as exc:  # noqa: BLE001 - reported in-band: the HTTP status is already sent
            logger.exception("Error in request")
            error = api.error_response_body(f"Internal server error: {exc}", "InternalServerError", 500)
            yield api.sse({"error": error})
    if include_usage:
        yield api.chat_usage_chunk(rid, created, model, api.usage_info(prompt_tokens, len(record.output_ids)))
    yield api.SSE_DONE
