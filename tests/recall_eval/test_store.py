"""The run store: atomic run.json, per-case appends, torn-line tolerance, clear errors."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest

from recall_eval.errors import UserError
from recall_eval.store import RunStore, list_runs, load_run, new_run_id, runs_home
from recall_eval.types import FORMAT_VERSION, Result, Run, RunSpec


def _run(run_id: str = "r1") -> Run:
    spec = RunSpec(lengths=(1000, 2000), depths=(0.0, 100.0))
    return Run(run_id=run_id, spec=spec, created_at=time.time())


def _result(case_id: str, outcome: str = "pass") -> Result:
    return Result(
        case_id=case_id,
        suite="needle",
        variant="default",
        outcome=outcome,
        answer="ZEBRA-1",
        target_tokens=1000,
        depth_percent=50.0,
        started_at=1.0,
        finished_at=2.0,
    )


def test_runs_home_follows_env(monkeypatch, tmp_path):
    monkeypatch.setenv("RECALL_EVAL_HOME", str(tmp_path / "x"))
    assert runs_home() == tmp_path / "x"
    monkeypatch.delenv("RECALL_EVAL_HOME")
    assert runs_home() == Path("runs")


def test_new_run_id_sortable_and_unique():
    spec = RunSpec(lengths=(1,), depths=(0.0,))
    first = new_run_id(spec)
    second = new_run_id(spec)
    assert first != second
    assert first[:15] <= second[:15]
    assert len(first.split("-")) == 3


def test_create_open_roundtrip(tmp_path):
    store = RunStore.create(_run(), root=tmp_path)
    assert store.path == tmp_path / "r1"
    store.append_result(_result("a"))
    store.append_result(_result("b", "miss"))
    run, results = load_run(store.path)
    assert run == store.run
    assert [r.case_id for r in results] == ["a", "b"]
    assert results[1].outcome == "miss"
    assert RunStore.open(store.path).final_case_ids() == {"a", "b"}


def test_create_refuses_existing_dir(tmp_path):
    RunStore.create(_run(), root=tmp_path)
    with pytest.raises(UserError, match="already exists"):
        RunStore.create(_run(), root=tmp_path)


def test_write_run_is_atomic_and_leaves_no_tmp(tmp_path):
    store = RunStore.create(_run(), root=tmp_path)
    store.write_run(store.run.model_copy(update={"status": "interrupted", "relaunches": 2}))
    assert json.loads((store.path / "run.json").read_text())["status"] == "interrupted"
    assert RunStore.open(store.path).run.relaunches == 2
    assert [p.name for p in store.path.iterdir() if p.name.endswith(".tmp")] == []


def test_run_updates_from_a_thread_and_the_loop_at_once_lose_nothing(tmp_path):
    """A relaunch counts from a worker thread while adaptations land from the event loop: each
    update_run reads and writes under one lock, so no change overwrites another."""
    store = RunStore.create(_run(), root=tmp_path)

    def relaunches() -> None:
        for _ in range(60):
            store.update_run(lambda run: run.model_copy(update={"relaunches": run.relaunches + 1}))

    worker = threading.Thread(target=relaunches)
    worker.start()
    for i in range(60):
        store.update_run(
            lambda run, i=i: run.model_copy(update={"adaptations": {**run.adaptations, f"a{i}": "x"}})
        )
    worker.join()
    on_disk = RunStore.open(store.path).run
    assert on_disk.relaunches == 60 and len(on_disk.adaptations) == 60


def test_torn_last_line_is_skipped_then_cut_on_next_append(tmp_path):
    store = RunStore.create(_run(), root=tmp_path)
    store.append_result(_result("a"))
    full_line = _result("b").model_dump_json()
    with open(store.results_path, "a") as handle:
        handle.write(full_line[: len(full_line) // 2])  # a crash mid-write
    reopened = RunStore.open(store.path)
    assert [r.case_id for r in reopened.results()] == ["a"]
    reopened.append_result(_result("c"))
    lines = store.results_path.read_text().splitlines()
    assert [json.loads(line)["case_id"] for line in lines] == ["a", "c"]


def test_corrupt_middle_line_is_an_error(tmp_path):
    store = RunStore.create(_run(), root=tmp_path)
    store.append_result(_result("a"))
    with open(store.results_path, "a") as handle:
        handle.write("{not json\n")
    store.append_result(_result("b"))
    with pytest.raises(UserError, match="line 2 is corrupt"):
        RunStore.open(store.path).results()


def test_open_errors_are_one_line(tmp_path):
    with pytest.raises(UserError, match="does not exist") as missing:
        RunStore.open(tmp_path / "nope")
    assert "\n" not in str(missing.value) and missing.value.exit_code == 2  # bad input
    with pytest.raises(UserError, match="not a run directory"):
        RunStore.open(tmp_path)
    (tmp_path / "run.json").write_text("{}")
    with pytest.raises(UserError, match="not a valid run file"):
        RunStore.open(tmp_path)


def test_list_runs_skips_non_runs(tmp_path):
    RunStore.create(_run("20240101-000000-aaaaaa"), root=tmp_path)
    RunStore.create(_run("20240102-000000-bbbbbb"), root=tmp_path)
    (tmp_path / "junk").mkdir()
    assert [s.run.run_id for s in list_runs(tmp_path)] == ["20240101-000000-aaaaaa", "20240102-000000-bbbbbb"]
    assert list_runs(tmp_path / "missing") == []


def test_a_newer_run_format_is_refused_by_name(tmp_path):
    run = Run(run_id="r", spec=RunSpec(lengths=(1000,), depths=(50.0,)), created_at=0.0)
    store = RunStore.create(run, tmp_path)
    data = json.loads((store.path / "run.json").read_text())
    data.update(format_version=FORMAT_VERSION + 1, field_from_the_future=1)
    (store.path / "run.json").write_text(json.dumps(data))
    with pytest.raises(
        UserError, match=f"has run format {FORMAT_VERSION + 1}; this recall-eval reads format"
    ):
        RunStore.open(store.path)
