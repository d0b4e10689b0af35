"""A sweep keeps no prompt after it is sent (issue 38 item 5: memory bounded in the number of cases).

api.sweep against the real reference server, one request at a time: calibration hands over cases
without their messages, and when each case starts, the prompts of every case already finished are
gone (weak references to their messages are dead after a collection). Before prompts were rendered
when sent, each calibrated case held its prompt until the run ended, and this test fails.
"""

from __future__ import annotations

import gc
import weakref
from pathlib import Path

import pytest

from recall_eval import api
from recall_eval.types import Case, Result
from tests.e2e.reference_server import ReferenceServer

pytestmark = pytest.mark.slow


class PromptWatch(api.Hooks):
    """Weak references to each sent prompt's messages; counts those still alive after their case ended."""

    def __init__(self) -> None:
        super().__init__()
        self.calibrated_with_prompt: list[str] = []
        self.prompts: dict[str, list[weakref.ref]] = {}
        self.finished: set[str] = set()
        self.alive_after_finish: list[int] = []  # at each case's start: earlier finished prompts still alive

    def alive_finished(self) -> int:
        gc.collect()
        return sum(
            any(ref() is not None for ref in refs)
            for case_id, refs in self.prompts.items()
            if case_id in self.finished
        )

    def sweep_progress(self, total: int, already_done: int, already_passed: int) -> api.SweepProgress:
        watch = self

        class Progress(api.hooks.QuietProgress):
            def calibrated(self, case: Case) -> None:
                if case.messages:
                    watch.calibrated_with_prompt.append(case.id)

            def started(self, case: Case) -> None:
                assert case.messages  # rendered for sending
                watch.alive_after_finish.append(watch.alive_finished())
                watch.prompts[case.id] = [weakref.ref(message) for message in case.messages]

            def finished(self, result: Result) -> None:
                watch.finished.add(result.case_id)

        return Progress()


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    handle = ReferenceServer(tmp_path_factory.mktemp("server") / "server.log", "--context-length", "4096")
    yield handle
    handle.stop()


def test_no_prompt_outlives_its_request(server: ReferenceServer, tmp_path: Path) -> None:
    watch = PromptWatch()
    run = api.sweep(
        lengths="338,700", depths="0,50,100", trials=1, max_tokens=8, concurrency=1,
        base_url=server.base_url, out=tmp_path, render_report=False, hooks=watch,
    )  # fmt: skip
    assert run.status == "finished" and len(run.results) == 6
    assert {result.prompt_tokens is not None for result in run.results} == {True}
    assert watch.calibrated_with_prompt == []  # calibration kept no prompt
    assert len(watch.prompts) == 6 and watch.finished == set(watch.prompts)
    # one request at a time: when a case starts, every earlier case has finished and its prompt is gone
    assert watch.alive_after_finish == [0] * 6
    assert watch.alive_finished() == 0
