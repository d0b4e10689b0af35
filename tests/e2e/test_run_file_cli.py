"""`--config run.toml` through the real CLI against a real server (tests/recall_eval/tiny_server.py):
a run driven by a TOML file is the same run as one driven by the same flags (spec, cases, verdicts,
stored configuration), `config show` prints that configuration, and a bad key stops before anything."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.cli import error_lines, run_cli
from tests.e2e.reference_server import free_port
from tests.e2e.served_process import start_served

pytestmark = pytest.mark.slow

TINY = Path(__file__).resolve().parents[1] / "recall_eval" / "tiny_server.py"


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    port = free_port()
    server = start_served(
        [sys.executable, str(TINY), str(port)], tmp_path_factory.mktemp("tiny") / "log", port
    )
    try:
        yield server.base_url
    finally:
        server.stop()


def _run(done) -> tuple[dict, list[tuple[str, str]], str]:  # type: ignore[no-untyped-def]
    run_dir = Path(done.stdout.strip().splitlines()[-1])
    run = json.loads((run_dir / "run.json").read_text())
    results = [json.loads(line) for line in (run_dir / "results.jsonl").read_text().splitlines()]
    return run, sorted((r["case_id"], r["outcome"]) for r in results), (run_dir / "config.toml").read_text()


def test_a_run_from_a_toml_file_equals_the_same_run_from_flags(tiny, tmp_path):
    flags = [
        "--suite", "needle,config", "--lengths", "338,700", "--depths", "0,100", "--trials", "2",
        "--seed", "7", "--concurrency", "2", "--variant", "candidate", "--fail-under", "needle=0.9",
        "--base-url", tiny, "--no-report",
    ]  # fmt: skip
    toml = tmp_path / "run.toml"
    toml.write_text(
        'suite = "needle,config"\nlengths = [338, 700]\ndepths = "0,100"\ntrials = 2\nseed = 7\n'
        f'concurrency = 2\nvariant = "candidate"\nfail-under = "needle=0.9"\nbase-url = "{tiny}"\nreport = false\n'
    )
    by_flags = run_cli("sweep", *flags)
    by_file = run_cli("sweep", "--config", str(toml))
    assert by_flags.returncode == by_file.returncode == 0, by_flags.stderr[-2000:] + by_file.stderr[-2000:]
    run_a, results_a, config_a = _run(by_flags)
    run_b, results_b, config_b = _run(by_file)
    assert run_a["spec"] == run_b["spec"] and run_a["spec"]["seed"] == 7 and run_a["spec"]["concurrency"] == 2
    assert results_a == results_b and len(results_a) == 16
    # the stored configuration is what was given, in the form given (a TOML list, or the flag's text)
    assert config_b == config_a.replace('lengths = "338,700"', "lengths = [338, 700]")
    assert "seed = 7\n" in config_a and 'fail-under = "needle=0.9"\n' in config_a
    shown = run_cli("config", "show", "sweep", "--config", str(toml))
    assert shown.returncode == 0, shown.stderr
    # the same, plus the defaults of the resume-only options sweep also takes (--stop-leftovers)
    assert shown.stdout.replace("# stop-leftovers = false\n", "") == config_b
    # a flag over the file: the flag wins, and the run file read back gives the same configuration
    over = run_cli("config", "show", "sweep", "--config", str(toml), "--trials", "1")
    assert "trials = 1\n" in over.stdout and "trials = 2" not in over.stdout


def test_an_unknown_key_exits_2_naming_it_before_anything_starts(tmp_path):
    toml = tmp_path / "run.toml"
    toml.write_text('suite = "needle"\nindex-top-k = 1024\n')
    done = run_cli("sweep", "--config", str(toml))
    assert done.returncode == 2
    (line,) = error_lines(done)
    assert line.startswith(f"error: --config {toml}: unknown key 'index-top-k' (did you mean 'index-topk'?)")
    compare = run_cli("compare", "fp8", "bf16", "--config", str(toml))
    assert compare.returncode == 2 and "unknown key 'index-top-k'" in compare.stderr
