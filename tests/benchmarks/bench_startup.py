"""CPU a user pays before `recall-eval --help` or `--version` answers (a benchmark, not a test: prints a table).

    python -m tests.benchmarks.bench_startup [--runs 10]

Each command runs in a fresh interpreter, as the installed entry point would; the CPU time (user +
system) of the child comes from getrusage; the bare interpreter (`python -c pass`) is printed beside
them, since the machine's Python start-up is part of every number. Target: under 0.3 s for `--help` and
`--version`, which holds while they import no command module (recall_eval/cli/__init__.py lists the
commands without loading them; pydantic, the library layer and the suites load only for a named
command, so `sweep --help` and `compare --help` pay for them). Also prints the modules `--help`
imported that it should not.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
ENTRY = "import sys; from recall_eval.cli import main; sys.argv[0] = 'recall-eval'; main()"
COMMANDS = (["--help"], ["--version"], ["sweep", "--help"], ["compare", "--help"])
HEAVY = (
    "pandas",
    "scipy",
    "matplotlib",
    "numpy",
    "httpx",
    "jinja2",
    "pydantic",
    "recall_eval.types",
    "suites",
)
TARGET_S = 0.3


def cpu_seconds(args: list[str], env: dict[str, str]) -> float:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run([sys.executable, "-c", ENTRY, *args], env=env, cwd=REPO, check=True, capture_output=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def cpu_bare(env: dict[str, str]) -> float:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run([sys.executable, "-c", "pass"], env=env, cwd=REPO, check=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def heavy_imports(env: dict[str, str]) -> list[str]:
    probe = ENTRY.replace("main()", "") + (
        "sys.argv = ['recall-eval', '--help']\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        f"print('HEAVY:' + ','.join(m for m in {HEAVY!r} if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", probe.replace("; ", "\n")], env=env, cwd=REPO,
                          capture_output=True, text=True, check=True)  # fmt: skip
    line = next(line for line in done.stdout.splitlines() if line.startswith("HEAVY:"))
    return [name for name in line.removeprefix("HEAVY:").split(",") if name]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10, help="runs per command (the median is printed)")
    runs = parser.parse_args().runs
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    print(f"{'command':<28} {'median CPU s':>12} {'max CPU s':>10}  target < {TARGET_S} s")
    bare = [cpu_bare(env) for _ in range(runs)]
    print(f"{'python -c pass':<28} {statistics.median(bare):>12.3f} {max(bare):>10.3f}  (the floor)")
    for args in COMMANDS:
        samples = [cpu_seconds(args, env) for _ in range(runs)]
        line = f"recall-eval {' '.join(args)}"
        verdict = "ok" if statistics.median(samples) < TARGET_S else "OVER"
        print(f"{line:<28} {statistics.median(samples):>12.3f} {max(samples):>10.3f}  {verdict}")
    heavy = heavy_imports(env)
    print(f"heavy modules imported by --help: {', '.join(heavy) if heavy else 'none'}")


if __name__ == "__main__":
    main()
