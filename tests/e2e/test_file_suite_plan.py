"""A prepared file's cases are its rows, whatever the grid: `recall-eval sweep --suite needle,jsonl:FILE`
against the scripted server plans (run.json, `runs`, runs_frame) the needle's lengths x depths x trials
plus one case per row of the file, never the file times the grid."""

from __future__ import annotations

import json

import pytest

from recall_eval import frame
from recall_eval.store import RunStore
from suites import jsonl_files
from tests.e2e.cli import run_cli
from tests.e2e.served_process import start_scripted


@pytest.fixture
def scripted(tmp_path):
    server = start_scripted({"KEY01": "ALPHA01"}, tmp_path)
    yield server
    server.stop()


def test_a_file_suite_plans_its_rows(scripted, tmp_path):
    rows = tmp_path / "rows.jsonl"
    rows.write_text(
        "".join(
            json.dumps({"prompt": f"What does KEY0{i} hold?", "expected": f"ALPHA0{i}"}) + "\n"
            for i in range(3)
        )
    )
    out = tmp_path / "runs"
    done = run_cli(
        "sweep", "--base-url", scripted.base_url, "--suite", f"needle,jsonl:{rows}", "--lengths", "600,900",
        "--depths", "0,100", "--trials", "2", "--out", str(out),
    )  # fmt: skip
    assert done.returncode in (0, 4), done.stderr
    (run_dir,) = [p for p in out.iterdir() if (p / "run.json").is_file()]
    planned = 2 * 2 * 2 + 3  # needle: lengths x depths x trials; the file: its 3 rows
    assert RunStore.open(run_dir).run.cases_planned == planned
    assert frame.runs_frame(run_dir)["planned"].tolist() == [planned]
    listed = run_cli("runs", "--home", str(out), "--json")
    (entry,) = json.loads(listed.stdout)["runs"]
    assert (entry["cases_done"], entry["cases_total"]) == (planned, planned)


def test_a_run_written_before_the_count_was_recorded():
    from recall_eval.types import Run, RunSpec

    grid = RunSpec(suites=("needle", "config"), lengths=(1000, 2000), depths=(0.0, 50.0, 100.0), trials=2)
    assert frame.planned_cases(Run(run_id="old", spec=grid, created_at=0.0)) == 2 * 2 * 3 * 2
    with_file = grid.model_copy(update={"suites": ("needle", "jsonl:/gone/rows.jsonl")})
    assert frame.planned_cases(Run(run_id="old", spec=with_file, created_at=0.0)) is None  # not guessed
    assert frame.planned_cases(Run(run_id="new", spec=with_file, created_at=0.0, cases_planned=9)) == 9
    # the core's file-suite prefixes are the suites' own
    assert set(frame.FILE_SUITE_PREFIXES) == {jsonl_files.RULER_PREFIX, jsonl_files.GENERIC_PREFIX}
