"""`python -m launchers.reference.server`: the reference DSA engine behind SGLang 0.5.23's HTTP API.

Start-up order: parse flags, configure SGLang-style logging, import the engine (torch), cap the
process's memory (--memory-limit-gb), start the HTTP server (so /health answers at once), load the
engine and allocate its KV pool in a background thread, warm it up, then /health_generate turns 200.

Deaths, as an SGLang GPU server dies:
- a KV pool that does not fit under the memory cap at start-up logs SGLang's
  "Not enough memory. Please try to increase --mem-fraction-static." and exits 1;
- an allocation failure during a request (EngineOutOfMemory) logs SGLang's
  "Prefill out of memory. ..." / "Decode out of memory. ..." and exits 1 (os._exit after
  flushing the log; SGLang kills itself with SIGKILL instead, which a parent sees as -9).
"""

from __future__ import annotations

import logging
import os
import sys
import threading
import time
from collections.abc import Sequence
from typing import NoReturn

import psutil
import uvicorn

from launchers.reference import allocator, sglang_log
from launchers.reference.engine_api import WEIGHTS_DIR, Engine, EngineOutOfMemory, EngineSettings
from launchers.reference.faults import FAULTS
from launchers.reference.http_routes import create_app
from launchers.reference.memory_limit import GIB, cap_data_memory, data_segment_bytes, is_allocation_failure
from launchers.reference.request_limits import RequestLimits
from launchers.reference.runtime import Ready, Runtime
from launchers.reference.scheduler import OutOfMemoryEvent, Scheduler
from launchers.reference.server_args import ServerArgs, parse_server_args

server_log = logging.getLogger(sglang_log.SERVER_LOGGER)
scheduler_log = logging.getLogger(sglang_log.SCHEDULER_LOGGER)
_death_lock = threading.Lock()


def _exit_now(code: int) -> NoReturn:
    sglang_log.flush_logs()
    os._exit(code)


def available_memory_bytes(limit_bytes: int | None) -> int:
    """What is left to allocate: under the cap when there is one, else the machine's free memory."""
    if limit_bytes is not None:
        return max(0, limit_bytes - data_segment_bytes())
    return int(psutil.virtual_memory().available)


def engine_settings(args: ServerArgs) -> EngineSettings:
    base = EngineSettings()
    return EngineSettings(
        weights_dir=args.model_path or WEIGHTS_DIR,
        index_k_dtype=args.index_k_dtype,
        index_topk=args.index_topk if args.index_topk is not None else base.index_topk,
        context_length=args.context_length,
        max_total_tokens=args.max_total_tokens,
        fault=args.fault,
        prefix_cache=not args.disable_radix_cache,
    )


def build_engine(settings: EngineSettings) -> Engine:
    from launchers.reference.engine import ReferenceEngine  # torch and the model: imported before the cap

    return ReferenceEngine(settings)


def die_out_of_memory(event: OutOfMemoryEvent) -> NoReturn:
    """Log SGLang's allocation-failure lines, then exit non-zero like a crashed GPU server."""
    with _death_lock:
        tokens = event.prompt_tokens if event.phase == "prefill" else event.running_requests
        message = sglang_log.out_of_memory_message(event.phase, tokens, event.free_tokens)
        scheduler_log.error(message)
        try:
            raise RuntimeError(message) from event.error
        except RuntimeError as wrapped:
            scheduler_log.error(sglang_log.scheduler_exception(wrapped))
        server_log.error(sglang_log.SIGQUIT_RUNNING)
        _exit_now(1)


def die_at_startup(exc: BaseException, args: ServerArgs) -> NoReturn:
    with _death_lock:
        if isinstance(exc, EngineOutOfMemory) or is_allocation_failure(exc):
            try:
                raise RuntimeError(sglang_log.not_enough_memory_message(args.mem_fraction_static)) from exc
            except RuntimeError as wrapped:
                exc = wrapped
        scheduler_log.error(sglang_log.scheduler_exception(exc))
        server_log.error(sglang_log.SIGQUIT_LAUNCH)
        _exit_now(1)


def startup_info(args: ServerArgs, engine: Engine, served: str, limit: int | None, started: float) -> dict:
    """The static part of /server_info: SGLang's resolved args and scheduler info, plus reference facts."""
    limits = RequestLimits(engine.context_length, engine.max_total_tokens)
    model_cfg = getattr(getattr(engine, "model", None), "cfg", None)  # the reference model's architecture
    return {
        "model_path": str(args.model_path or WEIGHTS_DIR),
        "served_model_name": served,
        "host": args.host,
        "port": args.port,
        "context_length": engine.context_length,
        "max_total_tokens": args.max_total_tokens,
        "max_running_requests": args.max_running_requests,
        "chunked_prefill_size": -1,
        "max_prefill_tokens": engine.context_length,
        "mem_fraction_static": args.mem_fraction_static,
        "json_model_override_args": args.json_model_override_args,
        "enable_return_indexer_topk": args.enable_return_indexer_topk,
        "log_level": args.log_level,
        "launch_command": args.launch_command,
        "api_key": args.api_key,  # SGLang's /server_info carries it too: recall-eval must not store it
        "status": "ready",
        "max_total_num_tokens": engine.max_total_tokens,
        "max_req_input_len": limits.max_req_input_len,
        "startup_time": started,
        "version": engine.version,
        "frontend": "python",
        # reference engine facts (not in SGLang's /server_info)
        "engine": "reference",
        "context_len": engine.context_length,
        "index_k_dtype": engine.settings.index_k_dtype,
        "index_k_dtype_source": args.index_k_dtype_source,
        "index_topk": engine.settings.index_topk,
        "num_indexer_layers": engine.n_indexer_layers,
        # for indexer coverage: tokens per compressed block, and the local window every DSA query sees
        "indexer_block_size": getattr(model_cfg, "compress_ratio", None),
        "indexer_local_window": getattr(model_cfg, "dsa_window", None),
        "kv_bytes_per_token": engine.kv_bytes_per_token,
        "kv_pool_bytes": engine.kv_bytes_per_token * engine.max_total_tokens,
        "memory_limit_gb": args.memory_limit_gb,
        "disable_radix_cache": args.disable_radix_cache,
        "fault": args.fault,  # a planted indexer bug (launchers/reference/faults.py); None normally
        "memory_limit_bytes": limit,
        "memory_limit_kind": "RLIMIT_DATA" if limit is not None else None,
        "sampling": "greedy; temperature, top_p, top_k and seed are accepted and ignored",
        "indexer_topk_layout": (
            "int32 (seqlen-1, num_indexer_layers, index_topk) of compressed-block indices (block b = "
            "tokens 4b..4b+3); rows of prompt positions other than the last are -1 (not reported)"
        ),
    }


def load_engine(runtime: Runtime, limit: int | None) -> None:
    """Runs in a background thread: builds the engine (weights + KV pool), warms it up, marks ready."""
    args = runtime.args
    settings = engine_settings(args)
    before = data_segment_bytes()
    tic = time.perf_counter()
    try:
        engine = build_engine(settings)
    except BaseException as exc:  # noqa: BLE001 - any start-up failure kills the server, logged
        die_at_startup(exc, args)
    elapsed = time.perf_counter() - tic
    used_gb = (data_segment_bytes() - before) / GIB
    kv_gb = engine.kv_bytes_per_token * engine.max_total_tokens / GIB
    avail_gb = available_memory_bytes(limit) / GIB
    scheduler_log.info(sglang_log.load_weight_end(elapsed, type(engine).__name__, avail_gb, used_gb))
    scheduler_log.info(
        sglang_log.kv_cache_allocated(f"index_k={settings.index_k_dtype}", engine.max_total_tokens, kv_gb)
    )
    scheduler_log.info(sglang_log.memory_pool_end(avail_gb))
    scheduler_log.info(
        sglang_log.scheduler_summary(
            engine.max_total_tokens,
            -1,
            engine.context_length,
            args.max_running_requests,
            engine.context_length,
            avail_gb,
        )
    )
    scheduler_log.info(
        f"Reference DSA engine: index_k_dtype={settings.index_k_dtype} ({args.index_k_dtype_source}), "
        f"index_topk={settings.index_topk}, num_indexer_layers={engine.n_indexer_layers}, "
        f"kv_bytes_per_token={engine.kv_bytes_per_token}, "
        f"memory_limit={'none' if limit is None else f'{limit / GIB:.3f} GiB (RLIMIT_DATA)'}"
    )
    if args.fault:
        scheduler_log.warning(
            f"PLANTED FAULT {args.fault}: {FAULTS[args.fault]} (this server is broken on purpose)"
        )
    scheduler = Scheduler(engine, args.max_running_requests, die_out_of_memory)
    try:
        for _ in engine.generate(engine.encode("warm up"), 1):
            pass
    except BaseException as exc:  # noqa: BLE001
        die_at_startup(exc, args)
    served = args.served_model_name or engine.model_name
    runtime.set_ready(
        Ready(
            engine=engine,
            scheduler=scheduler,
            limits=RequestLimits(engine.context_length, engine.max_total_tokens),
            served_model_name=served,
            index_topk=settings.index_topk,
            startup_info=startup_info(args, engine, served, limit, runtime.started_at),
        )
    )
    server_log.info(sglang_log.FIRED_UP)


def main(argv: Sequence[str] | None = None) -> None:
    args = parse_server_args(sys.argv[1:] if argv is None else argv, os.environ)
    sglang_log.configure_logging(args.log_level)
    server_log.info(f"server_args={args}")
    # Idle OpenMP workers sleep instead of spinning. Spinning workers made decode ~15x slower as soon
    # as other processes shared the 2 cores (measured under load: a one-token 256x768 linear took
    # 20 us on 1 thread, 2.4 ms on 2 spinning threads, 40 us on 2 PASSIVE threads). Before torch's import.
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    if allocator.keep_freed_memory():  # prefill reuses its pages instead of faulting them in again
        server_log.info("malloc: one arena, no mmap for large blocks, trim threshold 1 GiB")
    import launchers.reference.engine  # noqa: F401 - torch's imports before the memory cap

    limit = None
    if args.memory_limit_gb is not None:
        limit = int(args.memory_limit_gb * GIB)
        try:
            in_use = cap_data_memory(limit)
        except ValueError as exc:
            server_log.error(str(exc))
            _exit_now(2)
        server_log.info(
            f"Memory limit: RLIMIT_DATA={limit / GIB:.3f} GiB ({in_use / GIB:.3f} GiB in use before the model)"
        )
    runtime = Runtime(args)
    app = create_app(runtime)
    threading.Thread(target=load_engine, args=(runtime, limit), name="engine-loader", daemon=True).start()
    # log_config=None: uvicorn's lines (access log included, as SGLang keeps it) go through our format
    uvicorn.run(
        app,
        host=args.host,
        port=args.port,
        log_config=None,
        log_level=args.log_level,
        timeout_graceful_shutdown=5,
    )


if __name__ == "__main__":
    main()
