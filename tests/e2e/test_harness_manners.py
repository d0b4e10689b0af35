"""How a sweep treats the machine, through the library on real servers: the preflight (which imports
the engine: seconds) runs once per launch, run.json is written off the event loop, and a resume reads
what is stored once, not once per stored case."""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path

import pytest

import launchers.preflight
from recall_eval import api, store
from recall_eval.api.preparing import build_recipes
from recall_eval.api.sweeping import build_spec, external_profile
from recall_eval.api.versions import run_versions
from recall_eval.calibration import recipe_id
from recall_eval.store import RunStore
from recall_eval.types import Result, Run
from tests.recall_eval.test_runner import TinyServer

pytestmark = pytest.mark.slow


@pytest.fixture
def tiny():
    handle = TinyServer()
    yield handle
    handle.stop()


def test_the_preflight_runs_once_per_launch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A sweep that launches the reference engine checks it once (before the run directory is made),
    not again when it launches it."""
    checked: list[str] = []
    real = launchers.preflight.preflight

    def counted(profile, specs=None):
        checked.append(profile.name)
        return real(profile, specs)

    monkeypatch.setattr(launchers.preflight, "preflight", counted)
    run = api.sweep(
        lengths="400", depths="50", trials=1, max_tokens=8, port=0, out=tmp_path, render_report=False
    )
    assert run.status == "finished" and len(run.results) == 1
    assert checked == ["reference"]


def test_run_json_is_written_off_the_event_loop(tiny: TinyServer, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every write of run.json and the calibration cache while the sweep's loop runs happens on another
    thread (an adaptation noted on the loop included: the /v1 in the base URL), so requests in flight
    keep true timings."""
    on_loop: list[str] = []
    written: list[str] = []
    real = store.write_atomically

    def watched(path: Path, data: bytes) -> None:
        written.append(path.name)
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            pass
        else:
            on_loop.append(f"{path.name} on {threading.current_thread().name}")
        real(path, data)

    monkeypatch.setattr(store, "write_atomically", watched)
    monkeypatch.setattr("recall_eval.calibration.write_atomically", watched)
    run = api.sweep(
        lengths="400,600", depths="0,100", trials=1, max_tokens=8, base_url=f"{tiny.endpoint.base_url}/v1",
        render_report=False,
    )  # fmt: skip
    assert run.status == "finished" and "base_url" in run.run.adaptations
    assert written.count("run.json") >= 4 and "calibration-cache.json" in written
    assert on_loop == []


def test_resume_reads_the_stored_cases_once(tiny: TinyServer, monkeypatch: pytest.MonkeyPatch) -> None:
    """Resuming a run with 449 of its 450 cases stored runs the one left, and looks each case id up a
    few times, not once per stored case (which was 450 x 450)."""
    spec = build_spec(
        api.GridOptions(lengths="400,500,600,700,800,900,1000,1100,1200", depths="0..100:10", trials=5),
        api.RequestOptions(),
    )
    profile = external_profile(tiny.endpoint.base_url, None)
    run_store = RunStore.create(
        Run(run_id="big", spec=spec, profile=profile, versions=run_versions(spec), created_at=time.time(),
            status="interrupted"),
        store.runs_home(),
    )  # fmt: skip
    ids = [recipe_id(recipe) for recipe in build_recipes(spec)]
    assert len(ids) == 450
    with run_store.appender() as appender:
        for case_id in ids[:-1]:
            appender.append(
                Result(case_id=case_id, suite="needle", variant="default", outcome="pass", target_tokens=400,
                       depth_percent=0.0, started_at=0.0, finished_at=0.0)
            )  # fmt: skip
    calls = {"n": 0}

    def counted(recipe):
        calls["n"] += 1
        return recipe_id(recipe)

    for module in ("recall_eval.api.execute", "recall_eval.api.preparing"):
        monkeypatch.setattr(f"{module}.recipe_id", counted, raising=False)
    resumed = api.resume(run_store.path, render_report=False)
    assert resumed.status == "finished" and len(resumed.results) == 450
    assert calls["n"] <= 5 * len(ids), calls["n"]
