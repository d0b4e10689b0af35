"""The event loop sweeps run on: uvloop where it is installed (the default install brings it on Linux
and macOS), else asyncio's own; RECALL_EVAL_LOOP=asyncio picks asyncio's loop (a fallback, and for
comparison).

Why: at --concurrency 1 the harness's CPU per request is mostly the cost of waking for each network
chunk of a streamed answer (~20 per 32-token answer); uvloop (libuv) wakes for a chunk at about half
the CPU of asyncio's selector loop (`python -m tests.benchmarks.bench_harness --floor`, README)."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

LOOP_ENV = "RECALL_EVAL_LOOP"
_T = TypeVar("_T")


def loop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    """uvloop's new_event_loop, or None (asyncio's default) when asked for or not installed."""
    if os.environ.get(LOOP_ENV, "").strip().lower() == "asyncio":
        return None
    try:
        import uvloop
    except ImportError:
        return None
    return uvloop.new_event_loop


def loop_name() -> str:
    return "asyncio" if loop_factory() is None else "uvloop"


def run(main: Coroutine[Any, Any, _T]) -> _T:
    """asyncio.run(main) on the chosen loop (same Ctrl-C handling: the main task is cancelled)."""
    with asyncio.Runner(loop_factory=loop_factory()) as runner:
        return runner.run(main)
