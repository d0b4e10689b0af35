"""Kill soak: SIGKILL the harness or its server at random points across a sweep, resume, and count what
was lost, duplicated or left running.

    python -m tests.benchmarks.soak_kill [--kills 20] [--seed 1] [--concurrency 2]

A real `recall-eval sweep` on the reference profile (a subprocess, as a user runs it). At each kill
point (a random delay after the harness or its server started; with `by_results`, once 1 to 3 more
results are stored, so every kill lands while the grid still has cases, however fast the machine)
either the harness or the server's leader process gets SIGKILL. A killed server is relaunched by the harness; a killed harness is
followed, after up to 15 s for its guard to stop the server, by a count of the run's server
processes still alive and a `sweep --resume RUN --stop-leftovers`. After the last kill the run is
resumed until it finishes. Then:

  lost        cases of the grid with no line in results.jsonl                       (target 0)
  duplicated  cases with more than one line (no --retry is used here)              (target 0)
  leftovers   server processes alive 15 s after their harness was killed, and any
              process of the run alive after the end                                (target 0)
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import psutil
from rich.console import Console
from rich.table import Table

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

import suites  # noqa: E402
from launchers.server_records import live_members, load_records  # noqa: E402
from recall_eval.calibration import recipe_id  # noqa: E402
from recall_eval.store import RunStore  # noqa: E402
from tests.e2e.cli import cli_argv, cli_env  # noqa: E402

LEFTOVER_WAIT_S = 15.0


@dataclass
class SoakResult:
    kills: Counter[str] = field(default_factory=Counter)
    harness_starts: int = 0
    leftovers: int = 0  # server processes alive LEFTOVER_WAIT_S after a harness kill, or at the end
    lost: int = 0
    duplicated: int = 0
    cases: int = 0
    relaunches: int = 0
    status: str = ""
    wall_s: float = 0.0
    exit_codes: Counter[int] = field(default_factory=Counter)


def _start(args: list[str], home: Path, log: Path) -> subprocess.Popen[bytes]:
    env = cli_env()
    env["RECALL_EVAL_HOME"] = str(home)
    with open(log, "ab") as out:
        return subprocess.Popen(cli_argv(*args), env=env, cwd=REPO, stdout=out, stderr=subprocess.STDOUT)


def _run_dir(out: Path) -> Path | None:
    found = [path.parent for path in out.glob("*/run.json")]
    return found[0] if found else None


def _live_server_pid(run_dir: Path | None, harness_pid: int) -> int | None:
    """The leader of this harness's current server, if it is up."""
    if run_dir is None:
        return None
    for record in reversed(load_records(run_dir)):
        if record.harness_pid == harness_pid and live_members(record):
            return record.pid
    return None


def _alive(records_dir: Path | None) -> int:
    if records_dir is None:
        return 0
    return sum(len(live_members(record)) for record in load_records(records_dir))


def _wait_gone(run_dir: Path | None, timeout_s: float) -> int:
    """Server processes of the run still alive after timeout_s (0 once they are all gone)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if _alive(run_dir) == 0:
            return 0
        time.sleep(0.2)
    return _alive(run_dir)


def _stored(run_dir: Path | None) -> int:
    results = run_dir / "results.jsonl" if run_dir is not None else None
    return results.read_bytes().count(b"\n") if results is not None and results.exists() else 0


def soak(
    kills: int,
    seed: int,
    concurrency: int,
    lengths: str,
    depths: str,
    trials: int,
    work: Path,
    by_results: bool = False,
) -> SoakResult:
    rng = random.Random(seed)
    result = SoakResult()
    home, out, log = work / "home", work / "runs", work / "harness.log"
    grid = ["--lengths", lengths, "--depths", depths, "--trials", str(trials)]
    first = ["sweep", *grid, "--concurrency", str(concurrency), "--max-tokens", "16", "--out", str(out)]
    started = time.monotonic()
    try:
        return _soak_loop(rng, result, kills, home, out, log, first, started, by_results)
    finally:
        for child in psutil.Process().children():  # a harness of ours still running (an error above)
            child.terminate()
            child.wait(timeout=30)


def _soak_loop(
    rng: random.Random,
    result: SoakResult,
    kills: int,
    home: Path,
    out: Path,
    log: Path,
    first: list[str],
    started: float,
    by_results: bool = False,
) -> SoakResult:
    harness: subprocess.Popen[bytes] | None = None
    run_dir: Path | None = None
    server_pid_seen: int | None = None
    born, delay, target, at_results = 0.0, 0.0, "server", 0
    while True:
        if harness is None:
            run_dir = _run_dir(out)
            if run_dir is not None and RunStore.open(run_dir).run.status == "finished":
                break  # done (with fewer kills than asked when the grid ran out first: see the table)
            args = first if run_dir is None else ["sweep", "--resume", str(run_dir), "--stop-leftovers"]
            harness = _start([*args, "--no-report"], home, log)
            result.harness_starts += 1
            born = time.monotonic()
        assert harness is not None
        run_dir = run_dir or _run_dir(out)
        if harness.poll() is not None:  # ended by itself: finished, or gave up (resume it)
            result.exit_codes[harness.returncode] += 1
            harness = None
            continue
        if sum(result.kills.values()) >= kills:
            time.sleep(0.2)  # no more kills: let it finish
            continue
        server_pid = _live_server_pid(run_dir, harness.pid)
        if server_pid is not None and server_pid != server_pid_seen:
            server_pid_seen, born = server_pid, time.monotonic()  # a (re)started server: a new kill point
            delay = rng.uniform(0.5, 8.0)
            at_results = _stored(run_dir) + rng.randint(1, 3)
            target = rng.choice(("harness", "server"))
        due = _stored(run_dir) >= at_results if by_results else time.monotonic() - born >= delay
        if server_pid is None or not due:
            time.sleep(0.05 if not by_results else 0.01)
            continue
        if target == "server":
            psutil.Process(server_pid).kill()
            result.kills["server"] += 1
            continue
        harness.kill()
        harness.wait()
        result.kills["harness"] += 1
        result.exit_codes[harness.returncode] += 1
        harness = None
        result.leftovers += _wait_gone(run_dir, LEFTOVER_WAIT_S)
    result.wall_s = time.monotonic() - started
    assert run_dir is not None
    store = RunStore.open(run_dir)
    spec = store.run.spec
    expected = {
        recipe_id(recipe)
        for suite in spec.suites
        for recipe in suites.build_recipes(suite, spec.lengths, spec.depths, spec.trials, spec.seed)
    }
    lines = Counter(result.case_id for result in store.attempts())
    result.cases = len(expected)
    result.lost = len(expected - set(lines))
    result.duplicated = sum(1 for count in lines.values() if count > 1)
    result.relaunches = store.run.relaunches
    result.status = store.run.status
    result.leftovers += _wait_gone(run_dir, LEFTOVER_WAIT_S)
    return result


def table(result: SoakResult, kills: int, seed: int) -> Table:
    done = sum(result.kills.values())
    out = Table(title=f"kill soak: reference engine, {done} SIGKILLs of {kills} asked (seed {seed})")
    out.add_column("measure")
    out.add_column("value", justify="right")
    out.add_column("target", justify="right")
    out.add_row("cases in the grid", str(result.cases), "")
    out.add_row("SIGKILL of the harness", str(result.kills["harness"]), "")
    out.add_row("SIGKILL of the server", str(result.kills["server"]), "")
    out.add_row("harness starts (first + resumes)", str(result.harness_starts), "")
    out.add_row("server relaunches by the harness (run.json)", str(result.relaunches), "")
    codes = ", ".join(f"{code}: {count}" for code, count in sorted(result.exit_codes.items()))
    out.add_row("harness exit codes", codes, "")
    out.add_row("final run status", result.status, "finished")
    out.add_row("lost cases", str(result.lost), "0")
    out.add_row("duplicated cases", str(result.duplicated), "0")
    out.add_row("leftover server processes", str(result.leftovers), "0")
    out.add_row("wall time", f"{result.wall_s:.0f} s", "")
    return out


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--kills", type=int, default=20)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--concurrency", type=int, default=2)
    parser.add_argument("--lengths", default="400..3000:6")
    parser.add_argument("--depths", default="0..100:5")
    parser.add_argument("--trials", type=int, default=8)
    parser.add_argument("--keep", action="store_true", help="keep the work directory (its path is printed)")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="soak-"))
    try:
        result = soak(args.kills, args.seed, args.concurrency, args.lengths, args.depths, args.trials, work)
        Console(width=120).print(table(result, args.kills, args.seed))
        print(
            json.dumps({"lost": result.lost, "duplicated": result.duplicated, "leftovers": result.leftovers})
        )
    finally:
        if args.keep:
            print(f"work directory: {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
