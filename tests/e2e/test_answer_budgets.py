"""Each case is sent with its own answer budget, as RULER gives each task its own (niah 128, vt 30, cwe 120,
fwe 50; mrcr 64 here), when --max-tokens is not given; --max-tokens gives every case the same one. Through
the CLI against the scripted server, which answers with the max_tokens each request carried."""

from __future__ import annotations

from pathlib import Path

import pytest

from recall_eval.frame import results_frame
from recall_eval.store import RunStore
from tests.e2e.cli import run_cli
from tests.e2e.served_process import start_scripted

RULER_FILES = Path(__file__).resolve().parents[1] / "suites" / "ruler_files"


@pytest.fixture
def echo(tmp_path):
    server = start_scripted({"": "budget {max_tokens}"}, tmp_path)  # every request: its own max_tokens
    yield server
    server.stop()


def _sweep(server, out: Path, *extra: str) -> Path:
    suites = f"needle,niah_single_1,vt,cwe,fwe,mrcr_2,ruler-jsonl:{RULER_FILES / 'vt' / 'validation.jsonl'}"
    done = run_cli(
        "sweep", "--base-url", server.base_url, "--suite", suites, "--lengths", "1500", "--depths", "50",
        "--trials", "1", "--out", str(out), *extra,
    )  # fmt: skip
    assert done.returncode in (0, 4), done.stderr
    (run_dir,) = [p for p in out.iterdir() if (p / "run.json").is_file()]
    return run_dir


def test_without_max_tokens_each_case_gets_its_tasks_budget(echo, tmp_path):
    run_dir = _sweep(echo, tmp_path / "runs")
    frame = results_frame(run_dir)
    sent = frame[frame["counted"]]
    assert len(sent) == len(frame) and set(sent["task"]) >= {"needle", "vt", "mrcr_2"}
    # what the server received (echoed in the answer) is what the case carries and the frame says
    assert (sent["answer"] == "budget " + sent["max_tokens"].astype(str)).all()
    budgets = {suite: set(group["max_tokens"]) for suite, group in sent.groupby("suite")}
    assert budgets == {
        "needle": {32}, "niah_single_1": {128}, "vt": {30}, "cwe": {120}, "fwe": {50}, "mrcr_2": {64},
        "ruler-jsonl:vt": {30},  # RULER's own file: its task's budget
    }  # fmt: skip
    spec = RunStore.open(run_dir).run.spec
    assert spec.case_budgets and spec.max_tokens == 32
    html = (run_dir / "report.html").read_text()
    assert 'data-task="vt"' in html and 'data-max-tokens="30"' in html and 'data-max-tokens="120"' in html


def test_max_tokens_gives_every_case_the_same_budget(echo, tmp_path):
    run_dir = _sweep(echo, tmp_path / "runs", "--max-tokens", "16")
    frame = results_frame(run_dir)
    assert (frame["answer"] == "budget 16").all() and (frame["max_tokens"] == 16).all()
    assert not RunStore.open(run_dir).run.spec.case_budgets
