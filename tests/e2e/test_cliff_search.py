"""The cliff finder (`sweep --lengths search:MIN..MAX:BUDGET`) against a server of our own whose recall falls
above a fixed prompt length (tests/e2e/cliff_server.py): the bracket holds that length and is within 10% of
it, every batch's prompts are exactly their target length in the server's tokens, the search spends fewer
than half the cases of the full grid over the same range at the same trials, and running it again replays
the stored batches without sending a case. (Measured: bracket 2,985..3,067 around a cliff at 3,000, 36 cases
against 1,032 for the grid.)"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from recall_eval.store import load_run
from tests.e2e.cli import run_cli
from tests.e2e.reference_server import free_port
from tests.e2e.served_process import start_served

pytestmark = [pytest.mark.slow]
CLIFF = 3000
SERVER = Path(__file__).with_name("cliff_server.py")


@pytest.fixture(scope="module")
def cliff_url(tmp_path_factory: pytest.TempPathFactory):
    port = free_port()
    log = tmp_path_factory.mktemp("cliff") / "server.log"
    server = start_served([sys.executable, str(SERVER), str(port), str(CLIFF)], log, port)
    yield server.base_url
    server.stop()


def test_search_brackets_the_cliff_for_less_than_half_the_grid(cliff_url: str) -> None:
    args = ["sweep", "--base-url", cliff_url, "--suite", "needle", "--lengths", "search:500..16000:8",
            "--depths", "50", "--trials", "2", "--max-tokens", "24"]  # fmt: skip
    done = run_cli(*args, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    path = Path(done.stdout.strip().splitlines()[-1])
    search = json.loads((path / "search.json").read_text())
    held, fell = search["held"], search["fell"]
    assert held <= CLIFF < fell, search["lengths"]
    assert (fell - held) <= 0.1 * CLIFF
    assert search["cases_spent"] < search["grid_cases"] / 2, (search["cases_spent"], search["grid_cases"])
    assert search["grid_cases"] == search["grid_lengths"] * 8  # one suite, one depth, 8 trials per length
    assert f"cliff between {held:,} (last length that held) and {fell:,} tokens" in done.stderr
    decisions = {row["length"]: row["decision"] for row in search["lengths"]}
    assert all((d == "holds") == (n <= CLIFF) for n, d in decisions.items())
    # Every batch: a run of its own, its prompts their target length as the server counted them (the
    # harness's calibration: exact here but for 16,000, where it may land 1% short at most, its own bound).
    sent = 0
    for batch in search["batches"]:
        _, results = load_run(path / batch["run_dir"])
        assert {r.target_tokens for r in results} == {batch["length"]}
        for r in results:
            assert r.completion and abs(r.completion.prompt_tokens - r.target_tokens) <= max(
                8, r.target_tokens // 100
            )
        if batch["length"] <= 6727:
            assert all(r.completion and r.completion.prompt_tokens == r.target_tokens for r in results)
        sent += len(results)
    assert sent == search["cases_spent"]

    again = run_cli(*args, timeout=300)
    assert again.returncode == 0, again.stderr[-3000:]
    assert json.loads((path / "search.json").read_text())["batches"] == search["batches"]
    assert len([p for p in path.iterdir() if (p / "run.json").is_file()]) == len(search["batches"])


def test_compare_searches_each_variants_cliff(cliff_url: str, tmp_path: Path) -> None:
    """compare with a search: two servers with cliffs at 3,000 and 6,000 tokens; each variant's bracket holds
    its own cliff, on the same cases (same seed: the batches' case ids at a shared length are the same)."""
    port = free_port()
    other = start_served([sys.executable, str(SERVER), str(port), "6000"], tmp_path / "other.log", port)
    try:
        done = run_cli("compare", "short", "long", "--base-url", cliff_url, "--base-url", other.base_url,
                       "--suite", "needle", "--lengths", "search:1000..12000:4", "--depths", "50", "--trials", "2",
                       "--max-tokens", "24", timeout=900)  # fmt: skip
    finally:
        other.stop()
    assert done.returncode == 0, done.stderr[-3000:]
    short, long = (json.loads((Path(line) / "search.json").read_text()) for line in done.stdout.split())
    assert short["label"] == "short" and long["label"] == "long"
    assert short["held"] <= CLIFF < short["fell"] and long["held"] <= 6000 < long["fell"]
    assert "short: cliff between" in done.stderr and "long: cliff between" in done.stderr
    first = {label: load_run(path / s["batches"][0]["run_dir"])[1] for label, s, path in
             (("short", short, Path(done.stdout.split()[0])), ("long", long, Path(done.stdout.split()[1])))}  # fmt: skip
    assert {r.case_id for r in first["short"]} == {
        r.case_id for r in first["long"]
    }  # MIN, batch 0: same cases
