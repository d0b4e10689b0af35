"""The run store: atomic run.json, per-case appends, torn-line tolerance, clear errors."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest

from recall_eval.errors import UserError
from recall_eval.store import RunStore, list_runs, load_run, new_run_id, runs_home, scan_runs
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


def test_torn_last_line_is_skipped_then_set_aside_on_next_append(tmp_path):
    """A last line without its newline is a crash mid-write: not read, and moved to results.jsonl.torn
    (not lost) before the next append, which then starts on a line of its own."""
    store = RunStore.create(_run(), root=tmp_path)
    store.append_result(_result("a"))
    full_line = _result("b").model_dump_json()
    with open(store.results_path, "a") as handle:
        handle.write(full_line[: len(full_line) // 2])  # a crash mid-write
    reopened = RunStore.open(store.path)
    assert [r.case_id for r in reopened.results()] == ["a"] and reopened.unreadable() == []
    reopened.append_result(_result("c"))
    lines = store.results_path.read_text().splitlines()
    assert [json.loads(line)["case_id"] for line in lines] == ["a", "c"]
    assert (store.path / "results.jsonl.torn").read_text() == full_line[: len(full_line) // 2] + "\n"


def test_a_whole_line_that_is_not_a_result_is_kept_and_reported(tmp_path):
    """A complete line that fails validation (in the middle, or last with its newline) is not a torn
    write: it stays in the file through later appends and is reported by line number, never cut; the
    other lines still count."""
    store = RunStore.create(_run(), root=tmp_path)
    store.append_result(_result("a"))
    with open(store.results_path, "a") as handle:
        handle.write("{not json\n")
    store.append_result(_result("b"))
    with open(store.results_path, "a") as handle:
        handle.write('{"case_id": "c", "outcome": "maybe"}\n')  # complete, but not a Result
    reopened = RunStore.open(store.path)
    assert [r.case_id for r in reopened.results()] == ["a", "b"]
    assert [(u.line, u.reason) for u in reopened.unreadable()][0] == (2, "not JSON")
    assert [u.line for u in reopened.unreadable()] == [2, 4]
    assert "line 4 cannot be read" in reopened.unreadable()[1].describe()
    reopened.append_result(_result("d"))  # the next append cuts nothing
    lines = store.results_path.read_text().splitlines()
    assert lines[1] == "{not json" and json.loads(lines[3]) == {"case_id": "c", "outcome": "maybe"}
    assert json.loads(lines[4])["case_id"] == "d"
    assert not (store.path / "results.jsonl.torn").exists()


def test_a_result_line_with_a_field_from_a_newer_version_is_read_and_kept(tmp_path):
    """Stored models ignore fields they do not know, and write them back when they rewrite the object."""
    store = RunStore.create(_run(), root=tmp_path)
    line = json.loads(_result("a").model_dump_json())
    line["field_from_the_future"] = {"x": 1}
    line["completion"] = {"text": "ZEBRA-1", "new_timing_s": 0.5}
    store.results_path.write_text(json.dumps(line) + "\n")
    [result] = RunStore.open(store.path).results()
    assert result.case_id == "a" and result.completion.text == "ZEBRA-1"
    again = json.loads(result.model_copy(update={"outcome": "miss"}).model_dump_json())
    assert again["field_from_the_future"] == {"x": 1} and again["completion"]["new_timing_s"] == 0.5
    data = json.loads((store.path / "run.json").read_text())
    data["spec"]["knob_from_the_future"] = "on"
    data["unknown_top"] = [1, 2]
    (store.path / "run.json").write_text(json.dumps(data))
    reopened = RunStore.open(store.path)
    reopened.write_run(reopened.run.model_copy(update={"status": "finished"}))
    rewritten = json.loads((store.path / "run.json").read_text())
    assert rewritten["spec"]["knob_from_the_future"] == "on" and rewritten["unknown_top"] == [1, 2]
    assert rewritten["status"] == "finished"


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
    data["versions"] = {"recall-eval": "9.9.0"}
    (store.path / "run.json").write_text(json.dumps(data))
    with pytest.raises(UserError, match="written by a newer recall-eval 9.9.0 .*upgrade recall-eval") as err:
        RunStore.open(store.path)
    assert "\n" not in str(err.value)
    stores, unreadable = scan_runs(tmp_path)
    assert stores == [] and [u.path for u in unreadable] == [store.path]
    assert "newer recall-eval 9.9.0" in unreadable[0].reason


def test_a_format_1_run_json_is_migrated_on_read(tmp_path):
    """Format 2 records the scoring version in versions; a format-1 run.json (no such entry) reads as
    scored under version 1, and is written back as format 2."""
    store = RunStore.create(_run(), root=tmp_path)
    data = json.loads((store.path / "run.json").read_text())
    data["format_version"] = 1
    data["versions"] = {"recall-eval": "0.1.0"}
    (store.path / "run.json").write_text(json.dumps(data))
    reopened = RunStore.open(store.path)
    assert reopened.run.format_version == FORMAT_VERSION == 2
    assert reopened.run.versions == {"recall-eval": "0.1.0", "scoring": "1"}
