"""Benchmark of the harness itself: case building (calibration) speed and per-request overhead.

    python tests/benchmarks/bench_harness.py [--base-url URL] [--requests N]

Without --base-url it starts the real reference server (python -m launchers.reference.server) with
a context long enough for the default grid, and stops it at the end. Prints two tables:
1. cases built per second for the default grid (8 lengths 338..22597 x 5 depths x 2 trials),
   cold (empty calibration cache) and warm (the cache from the cold build), with the server's
   /v1/tokenize and, for comparison, the offline tiktoken fallback;
2. the harness's own cost per request next to the server's time: harness CPU time per request
   (request building, SSE parsing, scoring, the fsynced store append) and the wall time a case
   spends in the runner outside its HTTP request, against the request latency itself.
"""

from __future__ import annotations

import argparse
import asyncio
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


async def bench_overhead(endpoint: Endpoint, requests: int, max_tokens: int) -> Table:
    lengths = parse_lengths("338..2000:4")
    recipes = suites.build_recipes("needle", lengths, (0.0, 50.0, 100.0), 1, 3)[:requests]
    with tempfile.TemporaryDirectory() as home:
        spec = RunSpec(lengths=lengths, depths=(0.0, 50.0, 100.0), max_tokens=max_tokens)
        store = RunStore.create(Run(run_id="bench", spec=spec, created_at=time.time()), Path(home))
        async with http_client() as http:
            cases = await Calibrator(ServerTokenizer(endpoint, http)).calibrate(recipes)
            client = ChatClient(endpoint, http, request_timeout_s=600)
            runner = Runner(store, client, RunnerSettings(max_tokens=max_tokens, concurrency=1))
            cpu_before, wall_before = time.process_time(), time.perf_counter()
            await runner.run(cases)
            cpu, wall = time.process_time() - cpu_before, time.perf_counter() - wall_before
        results = store.results()
    latencies = [r.completion.latency_s for r in results if r.completion and r.completion.latency_s]
    outside = [(r.finished_at - r.started_at) - r.completion.latency_s for r in results if r.completion]
    n = len(results)
    table = Table(
        title=f"harness overhead per request ({n} requests, concurrency 1, max_tokens {max_tokens})"
    )
    table.add_column("measure")
    table.add_column("per request (ms)", justify="right")
    table.add_column("share of server time", justify="right")
    server_ms = statistics.mean(latencies) * 1000
    table.add_row("server time (request latency, client-measured)", f"{server_ms:.1f}", "100%")
    cpu_ms = cpu / n * 1000
    table.add_row(
        "harness CPU time (build, parse SSE, score, store)", f"{cpu_ms:.2f}", f"{cpu_ms / server_ms:.2%}"
    )
    outside_ms = statistics.mean(outside) * 1000
    table.add_row(
        "runner wall time outside the request", f"{outside_ms:.2f}", f"{outside_ms / server_ms:.2%}"
    )
    table.add_row(
        "sweep wall time per request", f"{wall / n * 1000:.1f}", f"{wall / n * 1000 / server_ms:.1%}"
    )
    return table


async def main_async(base_url: str, requests: int, max_tokens: int) -> None:
    async with http_client() as http:
        facts = await probe_server(base_url, http)
    endpoint = Endpoint(base_url=base_url, model=facts.model)
    console = Console(width=140)
    console.print(await bench_build(endpoint))
    console.print(await bench_overhead(endpoint, requests, max_tokens))


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--base-url", help="a running server; default: start the reference server")
    parser.add_argument("--requests", type=int, default=12)
    parser.add_argument("--max-tokens", type=int, default=32)
    args = parser.parse_args()
    if args.base_url:
        asyncio.run(main_async(args.base_url, args.requests, args.max_tokens))
        return
    with tempfile.TemporaryDirectory() as logs:
        server = ReferenceServer(Path(logs) / "server.log", "--context-length", "32768")
        try:
            asyncio.run(main_async(server.base_url, args.requests, args.max_tokens))
        finally:
            server.stop()


if __name__ == "__main__":
    main()
