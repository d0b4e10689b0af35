"""Gating a kernel change in CI with `recall-eval compare`, through the real CLI and real servers.

--fail-under on every variant (the reference engine launched as fp8 and bf16: needles found at these
short lengths, config values not all of them, the embedded model's recall), bad input rejected before anything
starts, and --fail-on-regression against a real drop: the reference engine as baseline, and as candidate
tests/recall_eval/tiny_server.py started with `wrong` (it answers every code reversed, like a kernel
that broke retrieval). The regression test needs the embedded model to find the needles of GRID; a
retrained model that does not would fail it with a message saying so.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from recall_eval.store import load_run
from tests.e2e.cli import error_lines, run_cli
from tests.e2e.reference_server import ReferenceServer, free_port
from tests.e2e.served_process import start_served

pytestmark = pytest.mark.slow

TINY = Path(__file__).resolve().parents[1] / "recall_eval" / "tiny_server.py"
# 12 needle cases: 12 pass->miss flips give an exact McNemar p of 2 / 2**12, far below 0.05
NEEDLES = ["--suite", "needle", "--lengths", "338,700", "--depths", "0,50,100", "--trials", "2"]
BOTH = ["--suite", "needle,config", "--lengths", "338,700", "--depths", "0,100", "--trials", "1"]


def _runs_home() -> Path:
    return Path(os.environ["RECALL_EVAL_HOME"])


def _gate_lines(done: subprocess.CompletedProcess[str]) -> list[str]:
    return [line for line in error_lines(done) if line.startswith("variant ")]


def _compare_json(done: subprocess.CompletedProcess[str]) -> dict:
    html = Path(done.stdout.strip().splitlines()[-1])
    assert html.name == "compare.html" and html.is_file(), done.stdout  # the report is written first
    return json.loads((html.parent / "compare.json").read_text())


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    server = ReferenceServer(tmp_path_factory.mktemp("reference") / "server.log")
    try:
        yield server.base_url
    finally:
        server.stop()


@pytest.fixture(scope="module")
def wrong(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    port = free_port()
    log = tmp_path_factory.mktemp("wrong") / "server.log"
    server = start_served([sys.executable, str(TINY), str(port), "wrong"], log, port)
    try:
        yield server.base_url
    finally:
        server.stop()


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["--fail-under", "95"], "--fail-under overall: 95 is not a recall between 0 and 1"),
        (["--fail-under", "needle=high"], "--fail-under needle: 'high' is not a number"),
        (["--fail-under", "config=0.9"], "suite 'config' is not in this run (its suites: needle)"),
        (["--suite", "needle,config", "--fail-under", "needle=0.9,needle=1"], "suite 'needle' given twice"),
    ],
)
def test_bad_fail_under_exits_2_before_any_server_starts(args, fragment):
    started = time.monotonic()
    done = run_cli("compare", "fp8", "bf16", *args)
    assert done.returncode == 2, done.stderr
    (line,) = error_lines(done)
    assert fragment in line, line
    assert not _runs_home().exists() or not any(_runs_home().iterdir())  # no run directory
    assert time.monotonic() - started < 60  # no server start


def test_fail_under_met_exits_0_and_missed_exits_4_per_variant_and_suite():
    met = run_cli("compare", "fp8", "bf16", *BOTH, "--fail-under", "needle=0.9", "--fail-on-regression")
    assert met.returncode == 0, met.stderr[-3000:]
    variants = _compare_json(met)["numbers"]["variants"]
    assert [v["label"] for v in variants] == ["fp8", "bf16"]

    # the same runs, reused; a config gate the embedded model misses names each variant below it
    missed = run_cli("compare", "fp8", "bf16", *BOTH, "--fail-under", "needle=0.9,config=0.9")
    assert missed.returncode == 4, missed.stderr[-3000:]
    reused = dict(re.findall(r"^(\w+): reusing run \S+ \((.+)\)$", missed.stderr, re.MULTILINE))
    assert sorted(reused) == ["bf16", "fp8"], missed.stderr
    expected = []
    for label in ("fp8", "bf16"):
        config = [r for r in load_run(Path(reused[label]))[1] if r.suite == "config"]
        passed = sum(r.outcome == "pass" for r in config)
        if passed / len(config) < 0.9:
            expected.append(
                f"variant {label}, config: recall {passed / len(config):.3f} ({passed}/{len(config)}) below --fail-under 0.9"
            )
    assert expected, "the embedded model finds >= 90% of these config values: choose a grid it misses"
    assert _gate_lines(missed) == expected, missed.stderr
    _compare_json(missed)  # the report is written before the exit

    overall = run_cli("compare", "fp8", "bf16", *BOTH, "--fail-under", "0.99")
    assert overall.returncode == 4, overall.stderr[-3000:]
    assert [line.split(":")[0] for line in _gate_lines(overall)] == [
        "variant fp8, overall",
        "variant bf16, overall",
    ]


def test_fail_on_regression_exits_4_on_a_real_drop_and_0_without_one(reference, wrong):
    urls = ["--base-url", reference, "--base-url", wrong]
    plain = run_cli("compare", "baseline", "candidate", *urls, *NEEDLES)
    assert plain.returncode == 0, plain.stderr[-3000:]  # no gate asked for: the report only
    pair = _compare_json(plain)["numbers"]["pairs"][0]["by_suite"]["needle"]
    assert pair["pass_to_miss"] == 12, f"the embedded model no longer finds these needles: {pair}"

    gated = run_cli("compare", "baseline", "candidate", *urls, *NEEDLES, "--fail-on-regression")
    assert gated.returncode == 4, gated.stderr[-3000:]
    p = f"{2 / 2**12:.2g}"
    assert _gate_lines(gated) == [
        "variant candidate, needle: recall 1.000 -> 0.000 against baseline, 12 pass->miss and 0 "
        f"miss->pass on paired cases, exact McNemar p = {p} < 0.05 (--fail-on-regression)"
    ], gated.stderr

    # the other way round the candidate gains recall: not a regression
    reverse = ["--base-url", wrong, "--base-url", reference]
    better = run_cli("compare", "broken", "fixed", *reverse, *NEEDLES, "--fail-on-regression")
    assert better.returncode == 0, better.stderr[-3000:]
    assert not _gate_lines(better)


def test_a_variant_without_a_live_answer_exits_3(reference, wrong):
    # the tiny server's context is 4096 tokens: every case is too long for the candidate
    urls = ["--base-url", reference, "--base-url", wrong]
    grid = ["--lengths", "5000", "--depths", "50", "--trials", "1"]
    done = run_cli("compare", "baseline", "candidate", *urls, *grid, "--fail-on-regression")
    assert done.returncode == 3, done.stderr[-3000:]
    assert (
        "variant candidate, no case got an answer from a live model (too_long 1): nothing was measured"
        in _gate_lines(done)
    ), done.stderr
