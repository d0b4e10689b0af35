"""The CI gate as a CI job runs it, through the real CLI and real servers: a baseline saved from a run of
the reference engine, then candidates gated against it with `sweep --baseline`.

The candidates: the reference engine itself (the gate passes), and tests/e2e/degrading_proxy.py in
front of it, which passes requests through up to a length and answers wrongly above it (a kernel
change that broke long-context retrieval): the gate exits 4 and its JUnit file, read by junitparser as
CI systems read it, fails exactly the long cells. --fail-fast against a candidate that is wrong
everywhere stops at the first look where the paired test clears its share of alpha. These tests need
the embedded model to find the needles of GRID at both lengths (asserted with a message).
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from junitparser import Failure, JUnitXml

from tests.e2e.cli import error_lines, run_cli
from tests.e2e.reference_server import ReferenceServer, free_port
from tests.e2e.served_process import start_served

pytestmark = pytest.mark.slow

PROXY = Path(__file__).with_name("degrading_proxy.py")
# 24 needle cases: 12 at 338 tokens, 12 at 700. 12 pass->miss flips give exact McNemar p = 2 / 2**12.
GRID = ["--suite", "needle", "--lengths", "338,700", "--depths", "0,50,100", "--trials", "4"]
LONG = 500  # the degraded candidate answers wrongly above this many tokens: the 700-token cells


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    server = ReferenceServer(tmp_path_factory.mktemp("reference") / "server.log")
    try:
        yield server.base_url
    finally:
        server.stop()


def _proxy(reference: str, above: int, folder: Path) -> Iterator[str]:
    port = free_port()
    argv = [sys.executable, str(PROXY), str(port), reference, str(above)]
    server = start_served(argv, folder / "proxy.log", port)
    try:
        yield server.base_url
    finally:
        server.stop()


@pytest.fixture(scope="module")
def degraded(reference: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    yield from _proxy(reference, LONG, tmp_path_factory.mktemp("degraded"))


@pytest.fixture(scope="module")
def broken(reference: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    yield from _proxy(reference, 0, tmp_path_factory.mktemp("broken"))


@pytest.fixture(scope="module")
def baseline(reference: str, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The baseline file, saved from a reference-engine run of GRID, as a repository would commit it."""
    home = tmp_path_factory.mktemp("baseline-runs")
    done = run_cli("sweep", "--base-url", reference, *GRID, "--no-report", home=home)
    assert done.returncode == 0, done.stderr[-3000:]
    run_dir = Path(done.stdout.strip().splitlines()[-1])
    path = tmp_path_factory.mktemp("repo") / "needle-baseline"
    saved = run_cli("baseline", "save", str(run_dir), str(path), home=home)
    assert saved.returncode == 0, saved.stderr
    assert Path(saved.stdout.strip()) == path.with_suffix(".json")
    document = json.loads(path.with_suffix(".json").read_text())
    outcomes = [case["outcome"] for case in document["cases"]]
    assert outcomes == ["pass"] * 24, f"the embedded model no longer finds every needle of GRID: {outcomes}"
    return path.with_suffix(".json")


def _run_dir(done) -> Path:  # type: ignore[no-untyped-def]
    return Path(done.stdout.strip().splitlines()[-1])


def test_baseline_file_is_small_and_holds_no_prompt_and_no_secret(reference, baseline, tmp_path):
    """What is committed: the spec, versions with the reuse key, one line per case; no needle value
    (a prompt's content), no answer, no key."""
    text = baseline.read_text()
    document = json.loads(text)
    assert document["format_version"] == 1 and document["name"] == "needle-baseline"
    assert {"prompts", "suite:needle", "recall-eval"} <= set(document["versions"])
    assert document["spec"]["lengths"] == [338, 700] and document["spec"]["trials"] == 4
    assert set(document["cases"][0]) == {
        "case_id", "suite", "target_tokens", "depth_percent", "trial", "outcome", "strict_outcome"
    }  # fmt: skip
    # one line per case (the header, spec and versions above them are the rest)
    case_lines = [line for line in text.splitlines() if '"case_id"' in line]
    assert len(case_lines) == len(document["cases"]) == 24
    # a run sent with a key: the baseline saved from it does not carry it
    home = tmp_path / "runs"
    keyed = run_cli(
        "sweep", "--base-url", reference, *GRID[:4], "--lengths", "338", "--depths", "50", "--trials", "1",
        "--api-key", "sk-gate-secret-1234", "--no-report", home=home,
    )  # fmt: skip
    assert keyed.returncode == 0, keyed.stderr[-2000:]
    saved = run_cli("baseline", "save", str(_run_dir(keyed)), str(tmp_path / "keyed.json"), home=home)
    assert saved.returncode == 0, saved.stderr
    stored = (tmp_path / "keyed.json").read_text()
    assert "sk-gate-secret-1234" not in stored and '"api_key_used": true' in stored
    answers = [
        json.loads(line)["answer"] for line in (_run_dir(keyed) / "results.jsonl").read_text().splitlines()
    ]
    assert answers and all(answer not in stored for answer in answers)


def test_the_same_engine_passes_the_gate_with_junit_and_step_summary(reference, baseline, tmp_path):
    """The reference engine against its own baseline: exit 0; the JUnit file has one test case per
    suite x length and no failure; GITHUB_STEP_SUMMARY set (as under GitHub Actions) gets the summary
    without any flag; --metrics records provenance."""
    summary = tmp_path / "summary.md"
    summary.write_text("earlier step\n")
    env = {**os.environ, "GITHUB_STEP_SUMMARY": str(summary)}
    junit, metrics = tmp_path / "junit.xml", tmp_path / "metrics.json"
    done = _run_with_env(
        env,
        "sweep", "--base-url", reference, "--baseline", str(baseline), "--no-report",
        "--junit", str(junit), "--metrics", str(metrics), "--commit", "abc1234",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    run = json.loads((_run_dir(done) / "run.json").read_text())
    assert run["spec"]["lengths"] == [338, 700] and run["spec"]["trials"] == 4  # the baseline's grid
    xml = JUnitXml.fromfile(str(junit))
    suites = list(xml)
    assert [suite.name for suite in suites] == ["recall-eval.default.needle"]
    cases = list(suites[0])
    assert [case.name for case in cases] == ["needle @ 338 tokens", "needle @ 700 tokens"]
    assert suites[0].tests == 2 and suites[0].failures == 0 and all(case.is_passed for case in cases)
    text = summary.read_text()
    assert text.startswith("earlier step\n")  # appended, as GitHub expects
    assert "## ✅ recall-eval gate passed" in text and "against baseline `needle-baseline`" in text
    assert "| needle | 24 | 100.0% [86.2%, 100.0%] | 100.0% |" in text
    facts = json.loads(metrics.read_text())
    assert facts["commit"] == "abc1234" and facts["verdict"] == {"exit_code": 0, "passed": True, "lines": []}
    assert facts["provenance"]["server_version"] and facts["provenance"]["engine"] == "external"
    assert facts["provenance"]["hardware"]["cpus"] == os.cpu_count()
    assert facts["suites"]["needle"]["recall"] == 1.0 and facts["baseline"]["name"] == "needle-baseline"


def _run_with_env(env: dict[str, str], *args: str):  # type: ignore[no-untyped-def]
    import subprocess

    from tests.e2e.cli import REPO, cli_argv, cli_env

    return subprocess.run(
        cli_argv(*args), capture_output=True, text=True, timeout=900, env={**cli_env(), **env}, cwd=REPO
    )


def test_a_candidate_wrong_above_a_length_exits_4_and_fails_the_long_cells(degraded, baseline, tmp_path):
    """Right up to 500 tokens, wrong above: 12 pass->miss flips on the paired cases (exact McNemar
    p = 2/2**12), exit 4 with the line saying so; JUnit: 2 tests, 1 failure (the 700-token cell),
    carrying its recall, interval and worst cases; the step summary says failed."""
    junit, summary = tmp_path / "junit.xml", tmp_path / "summary.md"
    done = run_cli(
        "sweep", "--base-url", degraded, "--baseline", str(baseline), "--no-report",
        "--junit", str(junit), "--step-summary", str(summary),
    )  # fmt: skip
    assert done.returncode == 4, done.stderr[-3000:]
    p = f"{2 / 2**12:.2g}"
    assert (
        "needle: recall 1.000 -> 0.500 against baseline needle-baseline on 24 paired cases, 12 pass->miss "
        f"and 0 miss->pass, exact McNemar p = {p} (Holm {p}) < 0.05"
    ) in error_lines(done), done.stderr[-3000:]
    (suite,) = list(JUnitXml.fromfile(str(junit)))
    assert suite.tests == 2 and suite.failures == 1 and suite.errors == 0 and suite.skipped == 0
    short, long = list(suite)
    assert short.is_passed
    (failure,) = long.result
    assert isinstance(failure, Failure)
    assert failure.message.startswith("recall 0.000 (0/12) [0.000, 0.24")
    assert "; baseline 1.000 on the same cases: needle is significantly worse" in failure.message
    worst = failure.text.splitlines()
    assert worst[0] == "worst cases:" and len(worst) == 6
    assert all("miss (baseline: pass)" in line and "ZZZZZ-0000-ZZZZZ" in line for line in worst[1:])
    text = summary.read_text()
    assert "## ❌ recall-eval gate failed (exit 4)" in text and "❌ worse" in text
    assert "- needle @ 700 tokens: recall 0.000 (0/12)" in text


def test_a_tolerance_wider_than_the_drop_passes(degraded, baseline):
    """--tolerance 60pp: the drop (0.5, its 95% interval about [0.28, 0.70]) reaches below 0.6, so the
    gate passes (a 2pp tolerance failing it: tests/recall_eval/test_baseline_gate.py)."""
    args = ["sweep", "--base-url", degraded, "--baseline", str(baseline), "--no-report"]
    wide = run_cli(*args, "--tolerance", "60pp")
    assert wide.returncode == 0, wide.stderr[-3000:]
    assert "recall 50.0%" in wide.stderr


def test_fail_fast_stops_a_bad_candidate_early_with_the_cases_it_spent(broken, baseline):
    """Wrong on every case: the looks come after 3, 5, 8, 10 ... of 24 cases, each at alpha
    0.025/9; 10 lost pairs give p = 2/2**10 = 0.002 < 0.0028, so it stops at look 4 after 10 cases,
    exit 4; run.json says so and holds exactly those 10 results."""
    done = run_cli("sweep", "--base-url", broken, "--baseline", str(baseline), "--fail-fast", "--no-report")
    assert done.returncode == 4, done.stderr[-3000:]
    assert "--fail-fast stopped the gate at look 4 of 10, after 10 of 24 cases" in error_lines(done)
    run_dir = Path(os.environ["RECALL_EVAL_HOME"])
    (run,) = [path for path in run_dir.iterdir() if (path / "run.json").is_file()]
    stored = json.loads((run / "run.json").read_text())
    assert stored["status"] == "failed" and "--fail-fast" in stored["note"]
    assert len((run / "results.jsonl").read_text().splitlines()) == 10


def test_a_baseline_of_other_cases_is_refused_naming_what_differs(baseline, reference):
    """Before any case runs: the grid given differs from the baseline's (exit 2, the difference named);
    a --tolerance without a baseline is bad input too."""
    done = run_cli(
        "sweep", "--base-url", reference, "--baseline", str(baseline), "--lengths", "338", "--trials", "1"
    )
    assert done.returncode == 2, done.stderr
    (line,) = error_lines(done)
    assert (
        "--lengths 338 here, 338,700 in the baseline" in line and "--trials 1 here, 4 in the baseline" in line
    )
    strict = run_cli("sweep", "--base-url", reference, "--baseline", str(baseline), "--scoring", "strict")
    assert strict.returncode == 2 and "--scoring strict here, lenient in the baseline" in strict.stderr
    alone = run_cli("sweep", "--base-url", reference, "--tolerance", "2pp")
    assert alone.returncode == 2 and "--tolerance" in alone.stderr
