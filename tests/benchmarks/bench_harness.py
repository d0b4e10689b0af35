"""Benchmark of the harness itself: case building (calibration) speed and per-request overhead.

    python -m tests.benchmarks.bench_harness [--base-url URL] [--requests N] [--overhead-only]
        [--profile FILE]

Without --base-url it starts the real reference server (python -m launchers.reference.server) with
a context long enough for the default grid, and stops it at the end. Prints two tables:
1. cases built per second for the default grid (8 lengths 338..22597 x 5 depths x 2 trials),
   cold (empty calibration cache) and warm (the cache from the cold build), with the server's
   /v1/tokenize and, for comparison, the offline tiktoken fallback;
2. the harness's own cost at --concurrency 1 and 8: harness CPU time per request (request building,
   SSE parsing, scoring, the fsynced store append on the writer thread) as a share of server time
   (the sum of request latencies), the wall time a case spends in the runner outside its request,
   and the event loop's lag (how late a 1 ms sleeper wakes: what blocking work on the loop would add
   to the timings of the requests in flight).
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
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
from recall_eval.api.execute import http_client  # noqa: E402
from recall_eval.calibration import CalibrationCache, Calibrator  # noqa: E402
from recall_eval.client import ChatClient  # noqa: E402
from recall_eval.grid import parse_depths, parse_lengths  # noqa: E402
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
    async with http_client() as http:
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


async def _overhead_run(
    endpoint: Endpoint, requests: int, max_tokens: int, concurrency: int, watch_loop: bool
) -> dict[str, float]:
    """One sweep of `requests` cases. watch_loop: run the lag monitor (its own wake-ups cost CPU, so
    CPU time is measured in a pass without it)."""
    lengths = parse_lengths("338..2000:4")
    depths = (0.0, 25.0, 50.0, 75.0, 100.0)
    recipes = suites.build_recipes("needle", lengths, depths, 4, 3)[:requests]
    with tempfile.TemporaryDirectory() as home:
        spec = RunSpec(lengths=lengths, depths=depths, max_tokens=max_tokens)
        store = RunStore.create(Run(run_id="bench", spec=spec, created_at=time.time()), Path(home))
        async with http_client() as http:
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


async def bench_overhead(
    endpoint: Endpoint, requests: int, max_tokens: int, levels: tuple[int, ...]
) -> Table:
    table = Table(
        title=f"harness overhead ({requests} requests per row, max_tokens {max_tokens}; loop lag from a second "
        "pass with a 1 ms monitor)"
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
    ):
        table.add_column(column, justify="right")
    for concurrency in levels:
        row = await _overhead_run(endpoint, requests, max_tokens, concurrency, watch_loop=False)
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
        )
    return table


async def main_async(base_url: str, requests: int, max_tokens: int, skip_build: bool) -> None:
    async with http_client() as http:
        facts = await probe_server(base_url, http)
    endpoint = Endpoint(base_url=base_url, model=facts.model)
    console = Console(width=160)
    if not skip_build:
        console.print(await bench_build(endpoint))
    console.print(await bench_overhead(endpoint, requests, max_tokens, (1, 8)))


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--base-url", help="a running server; default: start the reference server")
    parser.add_argument("--requests", type=int, default=24)
    parser.add_argument("--max-tokens", type=int, default=32)
    parser.add_argument("--overhead-only", action="store_true", help="skip the case-building table")
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
    if args.base_url:
        asyncio.run(main_async(args.base_url, args.requests, args.max_tokens, args.overhead_only))
        return
    with tempfile.TemporaryDirectory() as logs:
        server = ReferenceServer(Path(logs) / "server.log", "--context-length", "32768")
        try:
            asyncio.run(main_async(server.base_url, args.requests, args.max_tokens, args.overhead_only))
        finally:
            server.stop()


if __name__ == "__main__":
    main()
