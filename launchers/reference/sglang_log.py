"""Log lines in SGLang 0.5.23's format and wording, so recall-eval's log classifier reads them alike.

Format: "[YYYY-mm-dd HH:MM:SS] message" for the server process and "[... TP0] message" for
scheduler lines (utils/common.py configure_logger). The texts of the startup summary, the KV
pool lines and the out-of-memory deaths are SGLang's (managers/scheduler.py,
mem_cache/memory_pool.py, mem_cache/allocation.py, model_executor/pool_configurator.py).
"""

from __future__ import annotations

import logging
import sys
import traceback

SERVER_LOGGER = "sglang.srt.entrypoints.http_server"
SCHEDULER_LOGGER = "sglang.srt.managers.scheduler"
_DATEFMT = "%Y-%m-%d %H:%M:%S"


class _PrefixFilter(logging.Filter):
    """Adds SGLang's per-process prefix (" TP0" for the scheduler) to a record."""

    def __init__(self, prefix: str):
        super().__init__()
        self.prefix = prefix

    def filter(self, record: logging.LogRecord) -> bool:
        record.sglang_prefix = self.prefix
        return True


def configure_logging(level: str) -> None:
    handler = logging.StreamHandler(sys.stdout)
    handler.setFormatter(logging.Formatter("[%(asctime)s%(sglang_prefix)s] %(message)s", datefmt=_DATEFMT))
    handler.addFilter(_PrefixFilter(""))
    logging.basicConfig(level=getattr(logging, level.upper()), handlers=[handler], force=True)
    scheduler = logging.getLogger(SCHEDULER_LOGGER)
    scheduler_handler = logging.StreamHandler(sys.stdout)
    scheduler_handler.setFormatter(handler.formatter)
    scheduler_handler.addFilter(_PrefixFilter(" TP0"))
    scheduler.addHandler(scheduler_handler)
    scheduler.propagate = False
    for name in ("httpx", "httpcore"):
        logging.getLogger(name).setLevel(logging.WARNING)


def flush_logs() -> None:
    for handler in [*logging.getLogger().handlers, *logging.getLogger(SCHEDULER_LOGGER).handlers]:
        handler.flush()
    sys.stdout.flush()
    sys.stderr.flush()


def scheduler_summary(
    max_total_num_tokens: int,
    chunked_prefill_size: int,
    max_prefill_tokens: int,
    max_running_requests: int,
    context_len: int,
    available_cpu_mem_gb: float,
) -> str:
    return (
        f"max_total_num_tokens={max_total_num_tokens}, "
        f"chunked_prefill_size={chunked_prefill_size}, "
        f"max_prefill_tokens={max_prefill_tokens}, "
        f"max_running_requests={max_running_requests}, "
        f"context_len={context_len}, "
        f"available_cpu_mem={available_cpu_mem_gb:.2f} GB"
    )


def kv_cache_allocated(dtype: str, num_tokens: int, kv_size_gb: float) -> str:
    return f"KV Cache is allocated. dtype: {dtype}, #tokens: {num_tokens}, KV size: {kv_size_gb:.2f} GB"


def load_weight_end(elapsed_s: float, model_type: str, avail_gb: float, usage_gb: float) -> str:
    return (
        f"Load weight end. elapsed={elapsed_s:.2f} s, type={model_type}, "
        f"avail mem={avail_gb:.2f} GB, mem usage={usage_gb:.2f} GB."
    )


def memory_pool_end(avail_gb: float) -> str:
    return f"Memory pool end. avail mem={avail_gb:.2f} GB"


def out_of_memory_message(phase: str, tokens: int, available_tokens: int | None) -> str:
    """SGLang's allocation failure text: "Prefill out of memory. ..." / "Decode out of memory. ..."."""
    head = "Prefill" if phase == "prefill" else "Decode"
    text = f"{head} out of memory. Try to lower your batch size.\nTry to allocate {tokens} tokens.\n"
    if available_tokens is not None:
        text += (
            f"Available tokens: {available_tokens} (available_size={available_tokens} + evictable_size=0)\n"
        )
    return text


def not_enough_memory_message(mem_fraction_static: float | None) -> str:
    """SGLang's startup failure when the KV pool does not fit (pool_configurator.MemoryPoolConfig)."""
    msg = "Not enough memory. Please try to increase --mem-fraction-static."
    if mem_fraction_static is not None:
        msg += f" Current value: mem_fraction_static={mem_fraction_static}"
    return msg


def scheduler_exception(exc: BaseException) -> str:
    """'Scheduler hit an exception: <traceback>' as the scheduler process logs before it dies."""
    text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    return f"Scheduler hit an exception: {text}"


SIGQUIT_RUNNING = "SIGQUIT received. signum=None, frame=None. It usually means one child failed."
SIGQUIT_LAUNCH = "Received sigquit from a child process. It usually means the child failed."
FIRED_UP = "The server is fired up and ready to roll!"
