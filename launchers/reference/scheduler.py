"""Runs engine generations in worker threads and streams their steps to asyncio handlers.

engine.generate() is a blocking iterator (it waits until the KV pool has room, then prefills
and decodes), so each request gets its own thread; at most max_running_requests threads are
inside the engine at once, the rest wait for a turn. A consumer that stops listening (client
disconnect, stop string) sets a cancel flag: the worker leaves the engine at the next step and
closes the iterator, which frees the request's KV slots.

Steps run one at a time (a compute lock around each step): torch already uses every core for
one step, and two steps computing at once only make the intra-op thread pools fight over the
cores. Concurrent requests therefore interleave step by step, and a long prefill delays the
others' decode steps, as a prefill batch does in SGLang without chunked prefill. So that a
request never waits for KV room while holding the compute lock, a first step starts only when
the engine reports enough free slots (engine.available_tokens(), when the engine has it).
"""

from __future__ import annotations

import asyncio
import itertools
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from typing import Literal, NoReturn

from launchers.reference.engine_api import Engine, EngineOutOfMemory, StepOutput
from launchers.reference.memory_limit import is_allocation_failure

_ADMISSION_POLL_S = 0.1  # how often a queued worker looks at its cancel flag


@dataclass(frozen=True)
class GenerationJob:
    prompt_ids: list[int]
    max_new_tokens: int
    return_indexer_topk: bool = False
    ignore_eos: bool = False  # SGLang's sampling parameter: generate max_new_tokens whatever comes


@dataclass(frozen=True)
class OutOfMemoryEvent:
    """What the server needs to log SGLang's out-of-memory lines before it dies."""

    phase: Literal["prefill", "decode"]
    error: BaseException
    prompt_tokens: int
    running_requests: int
    free_tokens: int | None  # free KV slots before the failing step (None: the engine does not say)


OnOutOfMemory = Callable[[OutOfMemoryEvent], NoReturn]


@dataclass
class LoadCounters:
    running: int = 0  # requests that have produced at least one token and not finished
    queued: int = 0  # requests waiting for a turn or for KV room (before their first token)
    finished: int = 0
    generated_tokens: int = 0


class _End:
    """Marks the end of a worker's stream."""


class Scheduler:
    def __init__(self, engine: Engine, max_running_requests: int, on_out_of_memory: OnOutOfMemory):
        self._engine = engine
        self._turns = threading.BoundedSemaphore(max_running_requests)
        self._compute = threading.Lock()  # one engine step at a time
        self._room = threading.Condition()  # notified whenever a generation frees its KV slots
        self._on_out_of_memory = on_out_of_memory
        self._lock = threading.Lock()
        self._counters = LoadCounters()
        self._ids = itertools.count()
        self.max_running_requests = max_running_requests
        self.last_step_monotonic = 0.0  # when any request last produced a token (for /health_generate)

    def counters(self) -> LoadCounters:
        with self._lock:
            return LoadCounters(**vars(self._counters))

    async def stream(self, job: GenerationJob) -> AsyncIterator[StepOutput]:
        """Steps of one generation as they come. Closing this iterator early cancels the generation."""
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[StepOutput | BaseException | _End] = asyncio.Queue()
        cancel = threading.Event()

        def post(item: StepOutput | BaseException | _End) -> None:
            try:
                loop.call_soon_threadsafe(queue.put_nowait, item)
            except RuntimeError:  # the event loop is gone (server shutting down)
                cancel.set()

        worker = threading.Thread(
            target=self._work, args=(job, cancel, post), name=f"generate-{next(self._ids)}", daemon=True
        )
        with self._lock:
            self._counters.queued += 1
        worker.start()
        try:
            while True:
                item = await queue.get()
                if isinstance(item, _End):
                    return
                if isinstance(item, BaseException):
                    raise item
                yield item
        finally:
            cancel.set()

    def _work(
        self,
        job: GenerationJob,
        cancel: threading.Event,
        post: Callable[[StepOutput | BaseException | _End], None],
    ) -> None:
        steps = 0
        free_before: list[int | None] = [None]  # free KV slots before the latest step (SGLang's OOM line)
        try:
            while not self._turns.acquire(timeout=_ADMISSION_POLL_S):
                if cancel.is_set():
                    return
            try:
                if cancel.is_set():
                    return
                generation = self._engine.generate(
                    job.prompt_ids, job.max_new_tokens, job.return_indexer_topk, job.ignore_eos
                )
                try:
                    need = len(job.prompt_ids) + job.max_new_tokens
                    step = self._first_step(generation, need, cancel, free_before)
                    while step is not None:
                        steps += 1
                        self._count_step(first=steps == 1)
                        post(step)
                        if cancel.is_set() or step.finish_reason is not None:
                            break
                        with self._compute:
                            free_before[0] = self._free_tokens()
                            step = next(generation, None)
                finally:
                    generation.close()  # frees the KV slots, also on cancel and on error
                    with self._room:
                        self._room.notify_all()
            finally:
                self._turns.release()
        except EngineOutOfMemory as exc:
            self._die(exc, exc.phase, job, free_before[0])
        except Exception as exc:  # noqa: BLE001 - every failure is reported to the waiting handler
            if is_allocation_failure(exc):
                self._die(exc, "prefill" if steps == 0 else "decode", job, free_before[0])
            post(exc)
        finally:
            self._count_end(started=steps > 0)
            post(_End())

    def _first_step(
        self,
        generation: Iterator[StepOutput],
        need: int,
        cancel: threading.Event,
        free_before: list[int | None],
    ) -> StepOutput | None:
        """The first step (admission + prefill), started once the pool can take `need` tokens."""
        if self._free_tokens() is None or need > self._engine.max_total_tokens:
            return next(generation, None)  # the engine waits (or refuses) without the compute lock
        while not cancel.is_set():
            with self._compute:
                free_before[0] = self._free_tokens()
                if (free_before[0] or 0) >= need:
                    return next(generation, None)
            with self._room:
                self._room.wait(timeout=_ADMISSION_POLL_S)
        return None

    def _free_tokens(self) -> int | None:
        available = getattr(self._engine, "available_tokens", None)
        return int(available()) if callable(available) else None

    def _die(
        self,
        exc: BaseException,
        phase: Literal["prefill", "decode"],
        job: GenerationJob,
        free_tokens: int | None,
    ) -> NoReturn:
        with self._lock:
            running = self._counters.running
        event = OutOfMemoryEvent(phase, exc, len(job.prompt_ids), max(running, 1), free_tokens)
        self._on_out_of_memory(event)

    def _count_step(self, first: bool) -> None:
        with self._lock:
            self.last_step_monotonic = time.monotonic()
            self._counters.generated_tokens += 1
            if first:
                self._counters.queued -= 1
                self._counters.running += 1

    def _count_end(self, started: bool) -> None:
        with self._lock:
            if started:
                self._counters.running -= 1
            else:
                self._counters.queued -= 1
            self._counters.finished += 1
