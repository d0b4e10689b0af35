"""A needle sweep with and without the reference engine's prefix cache: time to first token and wall time.

python tests/benchmarks/bench_prefix_cache.py [--lengths 8192] [--depths 25,95,97] [--trials 4]

Runs `recall-eval sweep --profile reference` and `--profile reference-no-prefix-cache` (the same engine
with --disable-radix-cache) on one grid, one after the other, as a user would. Cases of one trial share
their haystack up to the first needle, so with the cache most prompts prefill only their suffix. Prints
one row per profile: passes, the summed and median time to first token over the cases, the sweep's wall
time (server start included), and whether every answer was the same text in both.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from tempfile import TemporaryDirectory

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.e2e.cli import run_cli  # noqa: E402 - after the path fix

PROFILES = ("reference", "reference-no-prefix-cache")


def sweep(profile: str, args: argparse.Namespace, home: Path) -> tuple[float, dict[str, dict]]:
    started = time.perf_counter()
    done = run_cli(
        "sweep",
        "--profile",
        profile,
        "--suite",
        "needle",
        "--lengths",
        args.lengths,
        "--depths",
        args.depths,
        "--trials",
        str(args.trials),
        home=home,
        cwd=home,
        timeout=3600,
    )
    wall = time.perf_counter() - started
    if done.returncode not in (0, 4):
        raise SystemExit(f"sweep --profile {profile} exited {done.returncode}:\n{done.stderr[-3000:]}")
    (run_dir,) = [p for p in home.iterdir() if (p / "results.jsonl").is_file()]
    rows = [json.loads(line) for line in (run_dir / "results.jsonl").read_text().splitlines()]
    return wall, {r["case_id"]: r for r in rows}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--lengths", default="8192")
    parser.add_argument("--depths", default="25,95,97")
    parser.add_argument("--trials", type=int, default=4)
    args = parser.parse_args()
    results = {}
    for profile in PROFILES:
        with TemporaryDirectory() as tmp:
            results[profile] = sweep(profile, args, Path(tmp))
    answers = {p: {k: r["completion"]["text"] for k, r in rows.items()} for p, (_, rows) in results.items()}
    same = answers[PROFILES[0]] == answers[PROFILES[1]]
    print("| profile | passes | TTFT summed (s) | TTFT median (s) | sweep wall (s) | same answers |")
    print("|---|---|---|---|---|---|")
    for profile, (wall, rows) in results.items():
        ttft = [r["completion"]["ttft_s"] for r in rows.values()]
        passes = sum(r["outcome"] == "pass" for r in rows.values())
        print(
            f"| {profile} | {passes}/{len(rows)} | {sum(ttft):.1f} | {statistics.median(ttft):.2f} |"
            f" {wall:.0f} | {'yes' if same else 'NO'} |"
        )


if __name__ == "__main__":
    main()
