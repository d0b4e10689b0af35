"""SGLang's native POST /generate for the reference engine (single requests; streamed or not).

Streamed chunks are cumulative like SGLang's default (non-incremental) streaming: each carries the
text and output_ids so far; the last one carries finish_reason, e2e_latency and, when asked and
enabled, meta_info.indexer_topk.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import aclosing
from typing import Any

from fastapi import Request
from fastapi.responses import JSONResponse, Response, StreamingResponse
from starlette.concurrency import run_in_threadpool

from launchers.reference import http_api as api
from launchers.reference.indexer_capture import encode_indexer_topk, indexer_topk_array
from launchers.reference.runtime import Ready
from launchers.reference.scheduler import GenerationJob
from launchers.reference.sglang_log import SERVER_LOGGER
from launchers.reference.text_stream import GenerationRecord, text_steps

logger = logging.getLogger(SERVER_LOGGER)
Consume = Callable[[Request, AsyncIterator[Any]], Awaitable[bool]]


class _Bad(ValueError):
    """A request SGLang refuses with 400."""


def _prompt_and_params(
    body: api.GenerateRequest,
) -> tuple[list[int] | None, int | None, tuple[str, ...], bool]:
    if isinstance(body.text, list) or (body.input_ids and isinstance(body.input_ids[0], list)):
        raise _Bad("Batch requests are not supported by the reference server; send one prompt per request.")
    if body.text is None and body.input_ids is None:
        raise _Bad("Either text, input_ids or input_embeds should be provided.")
    params = body.sampling_params or {}
    max_new = params.get("max_new_tokens", api.GENERATE_DEFAULT_MAX_NEW_TOKENS)
    if max_new is not None and (not isinstance(max_new, int) or max_new < 0):
        raise _Bad(f"max_new_tokens must be at least 0, got {max_new}.")
    stop = params.get("stop")
    if stop is not None and not isinstance(stop, str | list):
        raise _Bad(f"stop must be a string or a list of strings, got {stop!r}.")
    ignore_eos = params.get("ignore_eos", False)
    if not isinstance(ignore_eos, bool):
        raise _Bad(f"ignore_eos must be true or false, got {ignore_eos!r}.")
    ids = [int(i) for i in body.input_ids] if body.input_ids is not None else None  # type: ignore[arg-type]
    return ids, max_new, api.stop_strings(stop), ignore_eos


async def generate_response(
    ready: Ready, body: api.GenerateRequest, request: Request, allow_topk: bool, consume: Consume
) -> Response:
    received = time.perf_counter()
    try:
        ids, max_new, stops, ignore_eos = _prompt_and_params(body)
        prompt_ids = ids if ids is not None else await run_in_threadpool(ready.engine.encode, body.text or "")
        if not prompt_ids:
            raise _Bad("The input is empty: give text or input_ids with at least one token.")
        ready.limits.check_context(len(prompt_ids), max_new)
    except ValueError as exc:
        if body.stream:
            return StreamingResponse(_error_events(str(exc)), media_type="text/event-stream")
        return JSONResponse(api.generate_error_body(str(exc)), status_code=400)
    rid = body.rid or uuid.uuid4().hex
    # Without --enable-return-indexer-topk SGLang has no capturer and silently omits the field.
    want_topk = body.return_indexer_topk and allow_topk
    abort = ready.limits.scheduler_abort(len(prompt_ids))
    clipped = ready.limits.clip_max_new_tokens(len(prompt_ids), max_new)
    job = GenerationJob(prompt_ids, clipped, want_topk, ignore_eos)
    if body.stream:
        events = _generate_events(ready, job, stops, rid, abort, received)
        return StreamingResponse(events, media_type="text/event-stream")
    if abort is not None:
        return JSONResponse(api.generate_error_body(abort), status_code=400)
    record = GenerationRecord()
    try:
        if not await consume(request, text_steps(ready.scheduler, job, stops, record)):
            return Response(status_code=499)
    except ValueError as exc:  # the engine refused the input (e.g. token ids outside the vocabulary)
        return JSONResponse(api.generate_error_body(str(exc)), status_code=400)
    except Exception as exc:  # noqa: BLE001 - an engine failure is the request's 500, not the server's
        logger.exception("Error in request")
        return JSONResponse(api.generate_error_body(f"Internal server error: {exc}"), status_code=500)
    return JSONResponse(_final_output(ready, job, record, rid, time.perf_counter() - received))


def _final_output(ready: Ready, job: GenerationJob, record: GenerationRecord, rid: str, e2e: float) -> dict:
    topk_b64 = None
    if job.return_indexer_topk:
        array = indexer_topk_array(
            len(job.prompt_ids), record.indexer_topk, ready.engine.n_indexer_layers, ready.index_topk
        )
        topk_b64 = encode_indexer_topk(array)
    reason = api.finish_reason_json(
        record.finish_reason or "length", record.matched_stop, len(record.output_ids)
    )
    return api.generate_output(
        rid, record.text, record.output_ids, len(job.prompt_ids), reason, e2e, topk_b64, record.cached_tokens
    )


async def _error_events(message: str) -> AsyncIterator[str]:
    """A streamed /generate whose validation failed: SGLang sends 200, one error event, [DONE]."""
    error = {"message": message, "type": "invalid_request_error", "code": 400, "retryable": False}
    yield api.sse({"error": error})
    yield api.SSE_DONE


async def _generate_events(
    ready: Ready,
    job: GenerationJob,
    stops: tuple[str, ...],
    rid: str,
    abort: str | None,
    received: float,
) -> AsyncIterator[str]:
    prompt_tokens = len(job.prompt_ids)
    if abort is not None:  # the scheduler's abort reaches a streamed /generate as a finished chunk
        yield api.sse(api.generate_output(rid, "", [], prompt_tokens, api.abort_finish_reason(abort), None))
        yield api.SSE_DONE
        return
    record = GenerationRecord()
    released = ""
    try:
        async with aclosing(text_steps(ready.scheduler, job, stops, record)) as steps:
            async for step in steps:
                released += step.delta
                if step.finish_reason is None:
                    yield api.sse(
                        api.generate_output(rid, released, record.output_ids, prompt_tokens, None, None)
                    )
        yield api.sse(_final_output(ready, job, record, rid, time.perf_counter() - received))
    except ValueError as exc:  # the engine refused the input
        error = {"message": str(exc), "type": "invalid_request_error", "code": 400, "retryable": False}
        yield api.sse({"error": error})
    except Exception as exc:  # noqa: BLE001 - reported in-band: the HTTP status is already sent
        logger.exception("Error in request")
        error = {"message": f"Internal server error: {exc}", "type": "invalid_request_error", "code": 500}
        yield api.sse({"error": {**error, "retryable": False}})
    yield api.SSE_DONE
