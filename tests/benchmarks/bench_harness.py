"""Benchmark of the harness itself: case building (calibration) speed and per-request overhead.

    python -m tests.benchmarks.bench_harness [--base-url URL] [--requests N] [--repeat N]
        [--overhead-only] [--floor] [--profile FILE]

Without --base-url it starts the real reference server (python -m launchers.reference.server) with
a context long enough for the default grid, and stops it at the end. Prints two tables (three with --floor):
1. cases built per second for the default grid (8 lengths 338..22597 x 5 depths x 2 trials),
   cold (empty calibration cache) and warm (the cache from the cold build), with the server's
   /v1/tokenize and, for comparison, the offline tiktoken fallback;
2. the harness's own cost at --concurrency 1 and 8: harness CPU time per request (request building,
   SSE parsing, scoring, the fsynced store append on the writer thread) as a share of server time
   (the sum of request latencies) and of the sweep's wall time (at concurrency 8 the sum of latencies
   counts time spent queued behind the other requests, so the wall share is the stricter one), the
   wall time a case spends in the runner outside its request, and the event loop's lag (how late a 1 ms sleeper wakes: what blocking work on the loop would add
   to the timings of the requests in flight).
The loop is the CLI's (recall_eval.event_loop: uvloop unless RECALL_EVAL_LOOP=asyncio), and so is
the reader of streamed answers (recall_eval.stream_connection unless RECALL_EVAL_HTTP=httpx).
Harness CPU is time.process_time() of this process (all its threads, the writer included) over the
timed sweep only; the reference server is a child process in its own session, not counted.
--floor adds a third table: the same requests at concurrency 1 read by httpx alone (no parsing) and by a
bare asyncio socket, i.e. what the HTTP stack and the event loop cost before the harness does anything.
--profile FILE writes a cProfile (CPU-time clock) of the timed sweeps.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import cProfile
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

import suites  # noqa: E402
from recall_eval import event_loop  # noqa: E402
from recall_eval.calibration import CalibrationCache, Calibrator  # noqa: E402
from recall_eval.chat_client import ChatClient  # noqa: E402
from recall_eval.grid import parse_depths, parse_lengths  # noqa: E402
from recall_eval.http_client import make_http_client  # noqa: E402
from recall_eval.runner import Runner, RunnerSettings  # noqa: E402
from recall_eval.server_probe import probe_server  # noqa: E402
from recall_eval.store import RunStore  # noqa: E402
from recall_eval.tokenization import ServerTokenizer, TiktokenTokenizer  # noqa: E402
from recall_eval.types import Endpoint, Run, RunSpec  # noqa: E402
from tests.e2e.reference_server import ReferenceServer  # noqa: E402

DEFAULT_GRID = ("338..22597", "0..100:5", 2)


async def _build(tokenizer, recipes, cache: CalibrationCache) -> tuple[float, int]:
    calibrator = Calibrator(tokenizer, cache)
    started = time.perf_counter()
    cases = await calibrator.calibrate(recipes)
    elapsed = time.perf_counter() - started
    assert len(cases) == len(recipes)
    return elapsed, calibrator.tokenize_calls


class _Profiler:
    """--profile: cProfile over the timed sweeps only (the CPU columns then include cProfile's cost)."""

    def __init__(self, path: str | None):
        self.profile = cProfile.Profile(time.thread_time) if path else None  # CPU, not wall

    def __enter__(self) -> None:
        if self.profile is not None:
            self.profile.enable()

    def __exit__(self, *exc: object) -> None:
        if self.profile is not None:
            self.profile.disable()


PROFILER = _Profiler(None)


async def bench_build(endpoint: Endpoint) -> Table:
    lengths, depths, trials = parse_lengths(DEFAULT_GRID[0]), parse_depths(DEFAULT_GRID[1]), DEFAULT_GRID[2]
    recipes = suites.build_recipes("needle", lengths, depths, trials, 0)
    table = Table(
        title=f"case building: default grid, {len(recipes)} cases ({DEFAULT_GRID[0]} x {DEFAULT_GRID[1]} x {trials})"
    )
    for column in ("tokenizer", "cache", "seconds", "cases/s", "tokenize calls"):
        table.add_column(column, justify="right" if column not in ("tokenizer", "cache") else "left")
    async with make_http_client() as http:
        for tokenizer in (ServerTokenizer(endpoint, http), TiktokenTokenizer()):
            cache = CalibrationCache()
            for label in ("cold", "warm"):
                seconds, calls = await _build(tokenizer, recipes, cache)
                table.add_row(
                    tokenizer.name, label, f"{seconds:.2f}", f"{len(recipes) / seconds:.0f}", str(calls)
                )
    return table


async def _loop_lag(samples: list[float], stop: asyncio.Event, tick_s: float = 0.001) -> None:
    """How late the event loop wakes a 1 ms sleeper: what a blocking call on the loop adds to the
    TTFT and inter-token gaps of every request in flight."""
    while not stop.is_set():
        before = time.perf_counter()
        await asyncio.sleep(tick_s)
        samples.append(time.perf_counter() - before - tick_s)


class _StampedReader(asyncio.Protocol):
    """The least a reader of a stream must do: take the time of each network chunk, keep the bytes."""

    def __init__(self, closed: asyncio.Future[None]):
        self.closed, self.chunks = closed, []

    def data_received(self, data: bytes) -> None:
        self.chunks.append((time.perf_counter(), data))

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed.set_result(None)


async def _socket_request(endpoint: Endpoint, body: bytes) -> int:
    """One streamed request over a bare asyncio socket (no HTTP parsing; `Connection: close` ends it)."""
    host, port = endpoint.base_url.split("//", 1)[1].rstrip("/").rsplit(":", 1)
    loop = asyncio.get_running_loop()
    closed: asyncio.Future[None] = loop.create_future()
    transport, reader = await loop.create_connection(lambda: _StampedReader(closed), host, int(port))
    head = f"POST /v1/chat/completions HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
    transport.write(f"{head}Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode() + body)
    await closed
    return len(reader.chunks)


async def _httpx_request(http, endpoint: Endpoint, body: bytes) -> int:
    """One streamed request through httpx, each chunk timed, nothing parsed."""
    stamps = []
    url = f"{endpoint.base_url.rstrip('/')}/v1/chat/completions"
    async with http.stream(
        "POST", url, content=body, headers={"content-type": "application/json"}
    ) as response:
        async for _ in response.stream:
            stamps.append(time.perf_counter())
    return len(stamps)


async def _floor_run(endpoint: Endpoint, requests: int, max_tokens: int) -> list[tuple[str, float, float]]:
    """CPU per request of reading the same streams with less than the harness, at concurrency 1:
    (reader, CPU ms/request, CPU / sum of latencies)."""
    recipes = _overhead_recipes(requests)
    rows = []
    async with make_http_client() as http:
        cases = await Calibrator(ServerTokenizer(endpoint, http)).calibrate(recipes)
        client = ChatClient(endpoint, http, request_timeout_s=600)
        bodies = [json.dumps(client._body(case.messages, max_tokens)).encode() for case in cases]
        readers = (
            ("bare socket (no HTTP parsing)", lambda body: _socket_request(endpoint, body)),
            ("httpx stream, no parsing", lambda body: _httpx_request(http, endpoint, body)),
        )
        for name, request in readers:
            latency, cpu_before = 0.0, time.process_time()
            for body in bodies:
                sent = time.perf_counter()
                await request(body)
                latency += time.perf_counter() - sent
            cpu = time.process_time() - cpu_before
            rows.append((name, cpu / len(bodies) * 1000, cpu / latency))
    return rows


OVERHEAD_LENGTHS, OVERHEAD_DEPTHS = "338..2000:4", (0.0, 50.0, 100.0)


def _overhead_recipes(requests: int) -> list:
    """`requests` needle cases spread over every length and depth (the grid the issue measured on:
    4 lengths 338..2000 x 3 depths, repeated in trials), not the shortest cases first."""
    per_trial = len(parse_lengths(OVERHEAD_LENGTHS)) * len(OVERHEAD_DEPTHS)
    trials = -(-requests // per_trial)
    recipes = suites.build_recipes("needle", parse_lengths(OVERHEAD_LENGTHS), OVERHEAD_DEPTHS, trials, 3)
    step = len(recipes) / requests
    return [recipes[int(index * step)] for index in range(requests)]


async def _overhead_run(
    endpoint: Endpoint, requests: int, max_tokens: int, concurrency: int, watch_loop: bool
) -> dict[str, float]:
    """One sweep of `requests` cases. watch_loop: run the lag monitor (its own wake-ups cost CPU, so
    CPU time is measured in a pass without it)."""
    lengths, depths = parse_lengths(OVERHEAD_LENGTHS), OVERHEAD_DEPTHS
    recipes = _overhead_recipes(requests)
    with tempfile.TemporaryDirectory() as home:
        spec = RunSpec(lengths=lengths, depths=depths, max_tokens=max_tokens)
        store = RunStore.create(Run(run_id="bench", spec=spec, created_at=time.time()), Path(home))
        async with make_http_client() as http:
            cases = await Calibrator(ServerTokenizer(endpoint, http)).calibrate(recipes)
            client = ChatClient(endpoint, http, request_timeout_s=600)
            settings = RunnerSettings(max_tokens=max_tokens, concurrency=concurrency)
            runner = Runner(store, client, settings)
            lag: list[float] = [0.0]
            stop = asyncio.Event()
            monitor = asyncio.create_task(_loop_lag(lag, stop)) if watch_loop else None
            cpu_before, wall_before = time.process_time(), time.perf_counter()
            with PROFILER:
                await runner.run(cases)
            cpu, wall = time.process_time() - cpu_before, time.perf_counter() - wall_before
            stop.set()
            if monitor is not None:
                await monitor
        results = store.results()
    n = len(results)
    latencies = [r.completion.latency_s for r in results if r.completion and r.completion.latency_s]
    outside = [(r.finished_at - r.started_at) - r.completion.latency_s for r in results if r.completion]
    server_s = sum(latencies)  # server time: the sum of request latencies (client-measured)
    return {
        "n": n,
        "latency_ms": statistics.median(latencies) * 1000,
        "cpu_ms": cpu / n * 1000,
        "cpu_share": cpu / server_s,
        "outside_ms": statistics.median(outside) * 1000,
        "lag_p99_ms": statistics.quantiles(lag, n=100)[98] * 1000 if len(lag) > 100 else max(lag) * 1000,
        "lag_max_ms": max(lag) * 1000,
        "wall_per_request_ms": wall / n * 1000,
    }


def _reader_name() -> str:
    from recall_eval.stream_connection import stream_connections_enabled

    return "event-stream connections" if stream_connections_enabled() else "httpx reader"


async def bench_overhead(
    endpoint: Endpoint, requests: int, max_tokens: int, levels: tuple[int, ...], repeat: int = 1
) -> Table:
    medians = f"medians of {repeat} sweeps of " if repeat > 1 else ""
    table = Table(
        title=f"harness overhead ({medians}{requests} requests, max_tokens {max_tokens}, {event_loop.loop_name()} "
        f"loop, {_reader_name()}; loop lag from one more sweep with a 1 ms monitor)"
    )
    for column in (
        "concurrency",
        "median latency ms",
        "harness CPU ms/request",
        "harness CPU / server time",
        "runner wall outside request ms (median)",
        "event-loop lag p99 ms",
        "lag max ms",
        "sweep wall ms/request",
        "harness CPU / sweep wall",
    ):
        table.add_column(column, justify="right")
    for concurrency in levels:
        passes = [
            await _overhead_run(endpoint, requests, max_tokens, concurrency, watch_loop=False)
            for _ in range(repeat)
        ]
        row = {key: statistics.median(one[key] for one in passes) for key in passes[0]}
        lag = await _overhead_run(endpoint, requests, max_tokens, concurrency, watch_loop=True)
        row.update(lag_p99_ms=lag["lag_p99_ms"], lag_max_ms=lag["lag_max_ms"])
        table.add_row(
            str(concurrency),
            f"{row['latency_ms']:.1f}",
            f"{row['cpu_ms']:.2f}",
            f"{row['cpu_share']:.2%}",
            f"{row['outside_ms']:.2f}",
            f"{row['lag_p99_ms']:.2f}",
            f"{row['lag_max_ms']:.2f}",
            f"{row['wall_per_request_ms']:.1f}",
            f"{row['cpu_ms'] / row['wall_per_request_ms']:.2%}",
        )
    return table


async def bench_floor(endpoint: Endpoint, requests: int, max_tokens: int) -> Table:
    table = Table(title="the floor at concurrency 1: the same requests read with less than the harness")
    for column in ("reader", "CPU ms/request", "CPU / server time"):
        table.add_column(column, justify="left" if column == "reader" else "right")
    for name, cpu_ms, share in await _floor_run(endpoint, requests, max_tokens):
        table.add_row(name, f"{cpu_ms:.2f}", f"{share:.2%}")
    return table


async def main_async(
    base_url: str, requests: int, max_tokens: int, skip_build: bool, floor: bool = False, repeat: int = 1
) -> None:
    async with make_http_client() as http:
        facts = await probe_server(base_url, http)
    endpoint = Endpoint(base_url=base_url, model=facts.model)
    console = Console(width=160)
    if not skip_build:
        console.print(await bench_build(endpoint))
    console.print(await bench_overhead(endpoint, requests, max_tokens, (1, 8), repeat))
    if floor:
        console.print(await bench_floor(endpoint, requests, max_tokens))


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--base-url", help="a running server; default: start the reference server")
    parser.add_argument("--requests", type=int, default=24)
    parser.add_argument("--max-tokens", type=int, default=32)
    parser.add_argument(
        "--repeat", type=int, default=1, help="timed sweeps per concurrency; each column is their median"
    )
    parser.add_argument("--overhead-only", action="store_true", help="skip the case-building table")
    parser.add_argument(
        "--floor",
        action="store_true",
        help="also time the same requests read by httpx alone and by a bare socket (what no parser can beat)",
    )
    parser.add_argument(
        "--profile", metavar="FILE", help="write a cProfile of the timed sweeps to FILE (read with pstats)"
    )
    args = parser.parse_args()
    global PROFILER
    PROFILER = _Profiler(args.profile)
    try:
        _run(args)
    finally:
        if PROFILER.profile is not None:
            PROFILER.profile.dump_stats(args.profile)


def _run(args: argparse.Namespace) -> None:
    with contextlib.ExitStack() as stack:
        base_url = args.base_url
        if not base_url:
            logs = Path(stack.enter_context(tempfile.TemporaryDirectory()))
            server = ReferenceServer(logs / "server.log", "--context-length", "32768")
            stack.callback(server.stop)
            base_url = server.base_url
        event_loop.run(
            main_async(base_url, args.requests, args.max_tokens, args.overhead_only, args.floor, args.repeat)
        )


if __name__ == "__main__":
    main()
