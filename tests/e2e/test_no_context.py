"""`--suite SUITE~nocontext` through the command line: the questions go out without their haystacks,
are scored like the suite's own, and are not flagged as off their target length."""

from __future__ import annotations

import pytest

from recall_eval.frame import results_frame
from tests.e2e.cli import run_cli
from tests.e2e.served_process import start_scripted


@pytest.fixture
def guesser(tmp_path):
    # a model that always "knows" one RULER-shaped number: a suite that gave it away would score
    server = start_scripted({"special magic": "It is 1234567.", "": "no idea"}, tmp_path)
    yield server
    server.stop()


def test_no_context_baselines_run_short_and_scored(guesser, tmp_path):
    out = tmp_path / "runs"
    completed = run_cli(
        "sweep", "--base-url", guesser.base_url, "--suite", "needle~nocontext,niah_single_1~nocontext,mrcr_2~nocontext",
        "--lengths", "2000,4000", "--depths", "0,100", "--trials", "1", "--out", str(out),
    )  # fmt: skip
    assert completed.returncode in (0, 3, 4), completed.stderr
    (run_dir,) = [p for p in out.iterdir() if (p / "run.json").is_file()]
    frame = results_frame(run_dir)
    assert set(frame["suite"]) == {"needle~nocontext", "niah_single_1~nocontext", "mrcr_2~nocontext"}
    assert len(frame) == 3 * 2 * 2 and frame["counted"].all()
    assert (frame["prompt_tokens"] < 200).all() and not frame["length_off_target"].any()
    assert (frame["depth_percent"] == 0).all()
    niah = frame[frame["suite"] == "niah_single_1~nocontext"]
    assert (niah["score"] == 0).all() and (niah["answer"] == "It is 1234567.").all()
    needle = frame[frame["suite"] == "needle~nocontext"]
    assert needle["score"].isna().all() and set(needle["outcome"]) == {"miss"}  # a pass/miss suite stays one
    html = (run_dir / "report.html").read_text()
    assert 'data-task="niah_single_1~nocontext"' in html
    assert 'id="recall-scope"' in html  # recall is stated over the pass/miss suite (needle) only
