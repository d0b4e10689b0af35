"""The harness's own cost with very long prompts (a benchmark, not a test: prints two tables).

    python -m tests.benchmarks.bench_long_prompts [--requests 128] [--concurrency 64] [--reference]
        [--keep-prompts] [--profile FILE]

1. One 1,048,576-token needle case (depth 50), then three (depths 0, 50, 100, one build), built and
   calibrated: with the offline tiktoken counter, and with /v1/tokenize of tests/benchmarks/
   instant_server.py (real cl100k token ids, answered at once, so the harness's side is what is timed:
   request and response JSON, the search, the needle offsets). --reference adds the embedded reference
   server's /v1/tokenize (its own byte-level BPE; its tokenizer, not the harness, sets that time).
   Seconds (wall), tokenize calls, the harness's peak RSS after the row.
2. --requests needle cases of 131,072 tokens at --concurrency against the instant server: built,
   calibrated through its /v1/tokenize, sent as streamed chat completions, scored and written to a
   run's results.jsonl, as a sweep does. Harness CPU is time.process_time() of this process (all its
   threads, the results writer included) per phase. Server time is what the server measured of its own
   work: the union of its requests' serving intervals (its busy time; GET /stats). An instant server is
   busy for little more than the transfers, so the ratio printed is the harness's CPU per request against
   that, and the break-even: the busy time per request a server must spend for the harness to stay
   under 1% of it (100 x the harness's CPU per request). Calibrated cases drop their prompts and are
   rendered again when sent, as a sweep's are; --keep-prompts keeps every prompt from calibration to
   the run's end (as before), to compare the peak RSS.
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import os
import resource
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
from recall_eval.calibration import Calibrator  # noqa: E402
from recall_eval.chat_client import ChatClient  # noqa: E402
from recall_eval.http_client import make_http_client  # noqa: E402
from recall_eval.runner import Runner, RunnerSettings  # noqa: E402
from recall_eval.store import RunStore  # noqa: E402
from recall_eval.tokenization import ServerTokenizer, TiktokenTokenizer  # noqa: E402
from recall_eval.types import Endpoint, Run, RunSpec  # noqa: E402
from tests.e2e.served_process import free_port, start_served  # noqa: E402

MILLION = 1_048_576
LONG = 131_072
SERVER = Path(__file__).with_name("instant_server.py")


def peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


async def calibrate_million(tokenizer, depths: list[float]) -> tuple[float, float, int, int]:
    """(wall seconds to build and calibrate, harness CPU seconds, tokenize calls, prompt tokens of the
    first case)."""
    started, cpu = time.perf_counter(), time.process_time()
    recipes = suites.build_recipes("needle", [MILLION], depths, 1, 0)
    calibrator = Calibrator(tokenizer)
    cases = await calibrator.calibrate(recipes)
    wall, cpu = time.perf_counter() - started, time.process_time() - cpu
    return wall, cpu, calibrator.tokenize_calls, cases[0].prompt_tokens or 0


async def million_table(base_url: str, reference_url: str | None) -> Table:
    table = Table(
        title=f"building and calibrating {MILLION:,}-token needle cases (load average {os.getloadavg()[0]:.1f})"
    )
    columns = ("counted by", "cases", "wall s", "wall s / case", "harness CPU s", "tokenize calls")
    for column in (*columns, "prompt tokens", "peak RSS MiB"):
        table.add_column(column, justify="left" if column == "counted by" else "right")
    async with make_http_client() as http:
        counters = [("tiktoken (offline)", lambda: TiktokenTokenizer())]
        counters.append(
            (
                "instant server /v1/tokenize",
                lambda: ServerTokenizer(Endpoint(base_url=base_url, model="instant"), http),
            )
        )
        if reference_url:
            counters.append(
                (
                    "reference server /v1/tokenize",
                    lambda: ServerTokenizer(Endpoint(base_url=reference_url, model="reference"), http),
                )
            )
        for name, make in counters:
            for depths in ([50.0], [0.0, 50.0, 100.0]):
                tokenizer = make()  # tiktoken's ranks load here, outside the timing
                seconds, cpu, calls, tokens = await calibrate_million(tokenizer, depths)
                table.add_row(
                    name,
                    str(len(depths)),
                    f"{seconds:.2f}",
                    f"{seconds / len(depths):.2f}",
                    f"{cpu:.2f}",
                    str(calls),
                    f"{tokens:,}",
                    f"{peak_rss_mib():.0f}",
                )
    return table


async def long_run(
    base_url: str, requests: int, concurrency: int, keep_prompts: bool = False, profile: str | None = None
) -> Table:
    depths = [round(100 * i / 15, 2) for i in range(16)]
    trials = -(-requests // len(depths))
    endpoint = Endpoint(base_url=base_url, model="instant")
    rows: list[tuple[str, float, float]] = []  # phase, CPU s, wall s
    async with make_http_client() as http:
        await http.post(f"{base_url}/stats/reset")
        cpu, wall = time.process_time(), time.perf_counter()
        recipes = suites.build_recipes("needle", [LONG], depths, trials, 0)[:requests]
        rows.append(("build", time.process_time() - cpu, time.perf_counter() - wall))
        cpu, wall = time.process_time(), time.perf_counter()
        calibrator = Calibrator(ServerTokenizer(endpoint, http), keep_prompts=keep_prompts)
        profiler = cProfile.Profile(time.process_time) if profile else None
        with profiler or contextlib.nullcontext():
            cases = await calibrator.calibrate(recipes)
        if profiler is not None and profile:
            profiler.dump_stats(profile)
        rows.append(("calibrate (/v1/tokenize)", time.process_time() - cpu, time.perf_counter() - wall))
        rss_calibrated = peak_rss_mib()
        tokenize_stats = (await http.get(f"{base_url}/stats")).json()["tokenize"]
        await http.post(f"{base_url}/stats/reset")
        with tempfile.TemporaryDirectory() as home:
            spec = RunSpec(lengths=[LONG], depths=depths, max_tokens=32)
            store = RunStore.create(Run(run_id="bench", spec=spec, created_at=time.time()), Path(home))
            client = ChatClient(endpoint, http, request_timeout_s=600)
            runner = Runner(store, client, RunnerSettings(max_tokens=32, concurrency=concurrency))
            del recipes
            cpu, wall = time.process_time(), time.perf_counter()
            await runner.run(cases)
            rows.append(("send, stream, score, write", time.process_time() - cpu, time.perf_counter() - wall))
            passed = sum(result.outcome == "pass" for result in store.results())
        chat_stats = (await http.get(f"{base_url}/stats")).json()["chat"]
    table = Table(
        title=f"{requests} needle cases of {LONG:,} tokens at concurrency {concurrency} against the instant server "
        f"({passed} passed; load average {os.getloadavg()[0]:.1f})"
    )
    for column in (
        "phase",
        "harness CPU s",
        "CPU ms / request",
        "wall s",
        "server busy s (its own clock)",
        "harness CPU / server busy",
    ):
        table.add_column(column, justify="left" if column == "phase" else "right")
    busy = {
        "calibrate (/v1/tokenize)": tokenize_stats["busy_s"],
        "send, stream, score, write": chat_stats["busy_s"],
    }
    for phase, cpu_s, wall_s in rows:
        server = busy.get(phase)
        table.add_row(phase, f"{cpu_s:.2f}", f"{cpu_s / requests * 1000:.1f}", f"{wall_s:.2f}",
                      "" if server is None else f"{server:.2f}", "" if not server else f"{cpu_s / server:.0%}")  # fmt: skip
    total_cpu = sum(row[1] for row in rows)
    total_busy = sum(busy.values())
    table.add_row("all", f"{total_cpu:.2f}", f"{total_cpu / requests * 1000:.1f}", f"{sum(r[2] for r in rows):.2f}",
                  f"{total_busy:.2f}", f"{total_cpu / total_busy:.0%}")  # fmt: skip
    table.caption = (
        f"harness < 1% of server time when the server is busy >= {total_cpu / requests * 100:.1f} s per "
        f"{LONG:,}-token request (100 x the harness's CPU per request); peak RSS {peak_rss_mib():.0f} MiB "
        f"({rss_calibrated:.0f} MiB after calibration; "
        f"{'every case holds its prompt until the run ends' if keep_prompts else 'prompts rendered when sent'})"
    )
    return table


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--requests", type=int, default=128)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument(
        "--reference", action="store_true", help="also calibrate against the reference server"
    )
    parser.add_argument("--only", choices=("million", "long"), help="print one table")
    parser.add_argument(
        "--keep-prompts", action="store_true", help="calibrated cases keep their prompts (the old peak RSS)"
    )
    parser.add_argument(
        "--profile", metavar="FILE", help="write a cProfile (CPU clock) of the 131K calibration"
    )
    args = parser.parse_args()
    console = Console(width=170)
    with contextlib.ExitStack() as stack, tempfile.TemporaryDirectory() as logs:
        port = free_port()
        server = start_served([sys.executable, str(SERVER), str(port)], Path(logs) / "instant.log", port)
        stack.callback(server.stop)
        reference_url = None
        if args.reference:
            from tests.e2e.reference_server import ReferenceServer

            reference = ReferenceServer(Path(logs) / "reference.log")
            stack.callback(reference.stop)
            reference_url = reference.base_url
        if args.only != "long":
            console.print(event_loop.run(million_table(server.base_url, reference_url)))
        if args.only != "million":
            console.print(
                event_loop.run(
                    long_run(
                        server.base_url, args.requests, args.concurrency, args.keep_prompts, args.profile
                    )
                )
            )


if __name__ == "__main__":
    main()
