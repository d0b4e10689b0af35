"""The library layer called from Python, as a notebook would: api.sweep on the real reference engine
(launched by the library, and a running one), api.load_run, api.runs, api.resume, api.compare."""

from __future__ import annotations

from pathlib import Path

import psutil
import pytest

from recall_eval import api
from recall_eval.store import RunStore
from recall_eval.types import Case, Profile, Result
from tests.e2e.reference_server import ReferenceServer, free_port

pytestmark = pytest.mark.slow


class RecordingHooks(api.Hooks):
    """Keeps what the library reported, and counts progress calls."""

    def __init__(self) -> None:
        self.notes: list[str] = []
        self.server_lines: list[str] = []
        self.launched: list[str] = []
        self.finished: list[Result] = []
        self.done: list[api.RunRecord] = []

    def note(self, text: str, level: str = "info") -> None:
        self.notes.append(text)

    def server_output(self, line: str) -> None:
        self.server_lines.append(line)

    def launching(self, profile: Profile):  # type: ignore[override]
        self.launched.append(profile.name)
        return super().launching(profile)

    def sweep_progress(self, total: int, already_done: int, already_passed: int) -> api.SweepProgress:
        hooks = self

        class Progress(api.hooks.QuietProgress):
            def finished(self, result: Result) -> None:
                hooks.finished.append(result)

            def started(self, case: Case) -> None:
                assert case.prompt_tokens is not None  # calibrated before it is sent

        return Progress()

    def run_done(self, record: api.RunRecord) -> None:
        self.done.append(record)


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    handle = ReferenceServer(tmp_path_factory.mktemp("server") / "server.log", "--context-length", "4096")
    yield handle
    handle.stop()


def _reference_servers_on(port: int) -> list[psutil.Process]:
    return [
        process
        for process in psutil.process_iter(["cmdline"])
        if "launchers.reference.server" in (process.info["cmdline"] or [])
        and str(port) in (process.info["cmdline"] or [])
    ]


def test_sweep_launches_the_reference_engine_and_load_run_reads_it_back(tmp_path: Path) -> None:
    port = free_port()
    hooks = RecordingHooks()
    run = api.sweep(
        lengths=[400, 900], depths="0,100", trials=1, max_tokens=16, context_length=2048, port=port,
        out=tmp_path, variant="lib", hooks=hooks,
    )  # fmt: skip
    assert run.status == "finished" and run.variant == "lib" and run.path.parent == tmp_path
    assert (
        run.profile is not None and run.profile.engine == "reference" and run.profile.context_length == 2048
    )
    assert run.run.spec.lengths == (400, 900) and run.run.spec.seed == 0  # the default seed
    assert len(run.results) == 4 and {r.target_tokens for r in run.results} == {400, 900}
    assert run.report == run.path / "report.html" and run.report.is_file()
    assert run.answered == 4 and run.recall == run.passes / 4
    assert hooks.launched == ["reference"] and len(hooks.finished) == 4 and hooks.done == [run]
    assert any(note.startswith(f"run {run.run_id} -> ") for note in hooks.notes)
    assert [line for line in hooks.server_lines if "ready in" in line] == [
        next(line for line in hooks.server_lines if line.startswith("ready in "))
    ]  # readiness said once, by the launcher
    assert not any("ready" in note for note in hooks.notes)
    assert _reference_servers_on(port) == []  # stopped after the sweep
    frame = api.results_frame(run)  # the README's notebook lines
    recall = frame[frame.counted].pivot_table(index="depth_percent", columns="target_tokens", values="passed")
    assert recall.shape == (2, 2) and float(recall.to_numpy().mean()) == pytest.approx(run.recall)
    assert api.results_frame(run.path).equals(frame)
    again = api.load_run(run.path)
    assert again == run
    assert [record.run_id for record in api.runs(tmp_path)] == [run.run_id]


def test_sweep_against_a_running_server_with_options_then_resume(server: ReferenceServer) -> None:
    options = api.SweepOptions(
        grid=api.GridOptions(lengths="500,1000", depths=[50], trials=1, max_tokens=16),
        target=api.TargetOptions(base_url=server.base_url),
        render_report=False,
    )
    run = api.sweep(options, seed=3)  # keywords add to the options object
    assert run.status == "finished" and run.report is None and run.run.spec.seed == 3
    assert {r.tokenizer for r in run.results} == {"server:/v1/tokenize"}
    # Drop the last result and mark the run interrupted: resume runs exactly the missing case.
    store = RunStore.open(run.path)
    kept = run.results[0]
    store.results_path.write_text(kept.model_dump_json() + "\n")
    store.write_run(store.run.model_copy(update={"status": "interrupted"}))
    resumed = api.resume(run.path, concurrency=2, render_report=False)
    assert resumed.status == "finished" and resumed.run.spec.concurrency == 2
    assert len(resumed.results) == 2 and resumed.results[0] == kept
    assert {r.case_id for r in resumed.results} == {r.case_id for r in run.results}


def test_compare_two_labels_of_one_running_server_then_reuse(server: ReferenceServer) -> None:
    urls = [server.base_url, server.base_url + "/"]
    first = api.compare(["a", "b"], base_urls=urls, lengths="600", depths="50", trials=1, max_tokens=16)
    assert first.labels == ("a", "b") and first.report.is_file() and first.path == first.report.parent
    # One server under two labels: the same cases and target, so b reuses a's finished run.
    assert [run.reused for run in first.runs] == [False, True]
    assert first.runs[0].run_id == first.runs[1].run_id and first.runs[0].variant == "a"
    second = api.compare(["a", "b"], base_urls=urls, lengths="600", depths="50", trials=1, max_tokens=16)
    assert all(run.reused for run in second.runs) and second.path == first.path
    assert [run.run_id for run in second.runs] == [run.run_id for run in first.runs]
    assert api.render_report(first.path) == first.report  # a compare directory re-renders from disk
    assert api.render_report(first.runs[0].path) == first.runs[0].path / "report.html"
    [listed] = api.compares()
    assert listed.path == first.path and listed.labels == ("a", "b") and listed.report == first.report
    assert listed.run_dirs == (first.runs[0].path.resolve(), first.runs[0].path.resolve())
