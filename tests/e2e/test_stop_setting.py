"""`--stop`: stop sequences reach the real reference engine, which ends each answer before them; the
run stores them, and the report and the console show them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from recall_eval.frame import results_frame
from tests.e2e.cli import run_cli
from tests.e2e.reference_server import ReferenceServer
from tests.reports.dom import parse

pytestmark = pytest.mark.slow
GRID = ["--lengths", "338,700", "--depths", "0,100", "--trials", "1", "--max-tokens", "16"]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    handle = ReferenceServer(tmp_path_factory.mktemp("server") / "server.log", "--context-length", "2048")
    yield handle
    handle.stop()


def _answers(out: Path) -> tuple[Path, dict[str, str]]:
    (run_dir,) = [p for p in out.iterdir() if (p / "run.json").is_file()]
    frame = results_frame(run_dir)
    return run_dir, dict(zip(frame["case_id"], frame["answer"], strict=True))


def test_stop_sequences_end_the_engines_answers(server, tmp_path):
    """Greedy answers without --stop, then with a stop string taken from one of them: every answer is
    the first one cut before that string (the engine ended it there), which only a sent `stop` can do."""
    plain = run_cli("sweep", "--base-url", server.base_url, *GRID, "--out", str(tmp_path / "plain"))
    assert plain.returncode in (0, 3), plain.stderr
    _, before = _answers(tmp_path / "plain")
    text = next(answer.strip() for answer in before.values() if len(answer.strip()) >= 4)
    stop = text[1:3]  # inside the answer: the engine must cut it short
    stopped = run_cli(
        "sweep", "--base-url", server.base_url, *GRID, "--stop", stop, "--out", str(tmp_path / "stopped")
    )
    assert stopped.returncode in (0, 3), stopped.stderr
    run_dir, after = _answers(tmp_path / "stopped")
    assert after.keys() == before.keys()
    for case_id, answer in before.items():
        assert after[case_id].strip() == answer.split(stop)[0].strip(), (case_id, answer, stop)
    assert any(stop in answer for answer in before.values())  # some answer was cut
    run = json.loads((run_dir / "run.json").read_text())
    assert run["spec"]["stop"] == [stop]
    assert f"request settings: stop sequences {json.dumps([stop])}" in stopped.stderr
    settings = parse((run_dir / "report.html").read_text()).by_id("settings-table").text
    assert "stop sequences" in settings and stop in settings
