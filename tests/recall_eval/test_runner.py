"""The runner against a tiny real HTTP server process: outcomes, resume, deaths and relaunches."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from launchers.ports import free_port
from recall_eval.chat_client import ChatClient
from recall_eval.indexer_capture import Generation
from recall_eval.runner import Runner, RunnerHooks, RunnerSettings, ServerGone, SweepStopped
from recall_eval.store import RunStore
from recall_eval.types import Case, ChatMessage, Completion, Endpoint, Run, RunSpec, ServerDeath

SERVER = Path(__file__).with_name("tiny_server.py")


class TinyServer:
    """A ServerHandle over tiny_server.py: a real process in its own process group."""

    def __init__(self) -> None:
        self.port = free_port()
        self.endpoint = Endpoint(base_url=f"http://127.0.0.1:{self.port}", model="tiny")
        self.process: subprocess.Popen | None = None
        self.launches = 0
        self.answers_noted = 0
        self.relaunch()

    def note_served(self) -> None:
        self.answers_noted += 1

    def relaunch(self) -> float:
        started = time.perf_counter()
        self.process = subprocess.Popen([sys.executable, str(SERVER), str(self.port)], start_new_session=True)
        self.launches += 1
        deadline = time.time() + 30
        while time.time() < deadline:
            try:
                if httpx.get(f"{self.endpoint.base_url}/v1/models", timeout=1).status_code == 200:
                    return time.perf_counter() - started
            except httpx.TransportError:
                time.sleep(0.05)
        raise RuntimeError("tiny server did not start")

    def poll_death(self) -> ServerDeath | None:
        code = self.process.poll()
        if code is None:
            return None
        return ServerDeath(
            outcome="crash", reason=f"server exited with code {code}", exit_code=code, log_line="fatal: test"
        )

    def stop(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()


@pytest.fixture
def server():
    handle = TinyServer()
    yield handle
    handle.stop()


def _case(index: int, text: str, value: str = "ZEBRA-1-OMEGA") -> Case:
    return Case(
        id=f"c{index}",
        suite="needle",
        messages=(ChatMessage(role="user", content=text),),
        expected=(value,),
        target_tokens=100 + index,
        depth_percent=0.0,
        seed=0,
        prompt_tokens=100 + index,
        tokenizer="test",
    )


def _store(tmp_path: Path) -> RunStore:
    run = Run(run_id="r", spec=RunSpec(lengths=(100,), depths=(0.0,)), created_at=time.time())
    return RunStore.create(run, root=tmp_path)


def _runner(store, server, handle=True, timeout=5.0, **settings) -> Runner:
    http = httpx.AsyncClient(timeout=httpx.Timeout(None, connect=2))
    client = ChatClient(server.endpoint, http, request_timeout_s=timeout, retries=1, backoff_s=0.01)
    events: list[str] = []
    runner = Runner(
        store,
        client,
        RunnerSettings(relaunch_backoff_s=0.01, **settings),
        handle=server if handle else None,
        hooks=RunnerHooks(on_event=events.append),
    )
    runner.events = events
    return runner


async def test_outcomes_and_each_case_once(tmp_path, server):
    store = _store(tmp_path)
    cases = [
        _case(0, "The code is ZEBRA-1-OMEGA."),
        _case(1, "The code is LION-2-ALPHA."),
        _case(2, "@long"),
        _case(3, "@e500"),
        _case(4, "huge", value="X").model_copy(update={"prompt_tokens": 5000}),
        _case(5, "@die").model_copy(update={"not_applicable": "does not fit: takes 300 tokens"}),
    ]
    appended = await _runner(store, server, context_limit=4096, concurrency=3).run(cases)
    assert appended == 6
    outcomes = {r.case_id: r.outcome for r in store.results()}
    assert outcomes == {
        "c0": "pass", "c1": "miss", "c2": "too_long", "c3": "error", "c4": "too_long", "c5": "not_applicable"
    }  # fmt: skip
    by_id = {r.case_id: r for r in store.results()}
    assert "not sent" in by_id["c4"].error
    assert by_id["c5"].error == "does not fit: takes 300 tokens" and by_id["c5"].completion is None
    assert server.launches == 1  # "@die" was never sent
    assert by_id["c0"].completion.ttft_s is not None and by_id["c0"].completion.prompt_tokens == 4
    # resume: nothing left to do, nothing appended twice
    assert await _runner(store, server).run(cases) == 0
    assert len(store.results()) == 6


async def test_timeout_with_live_server_is_timeout(tmp_path, server):
    store = _store(tmp_path)
    await _runner(store, server, timeout=0.5).run([_case(0, "@slow")])
    [result] = store.results()
    assert result.outcome == "timeout"


async def test_death_gives_crash_relaunches_and_continues(tmp_path, server):
    store = _store(tmp_path)
    cases = [_case(0, "ZEBRA-1-OMEGA @die"), _case(1, "ZEBRA-1-OMEGA"), _case(2, "ZEBRA-1-OMEGA")]
    runner = _runner(store, server, concurrency=1)
    await runner.run(cases)
    outcomes = {r.case_id: r.outcome for r in store.results()}
    assert outcomes == {"c0": "crash", "c1": "pass", "c2": "pass"}
    crashed = next(r for r in store.results() if r.case_id == "c0")
    assert "exit code 3" in crashed.error and "fatal: test" in crashed.error
    assert server.launches == 2
    assert RunStore.open(store.path).run.relaunches == 1
    assert any("relaunched" in event for event in runner.events)


async def test_in_flight_cases_share_the_death(tmp_path, server):
    store = _store(tmp_path)
    cases = [_case(0, "ZEBRA-1-OMEGA @die"), _case(1, "ZEBRA-1-OMEGA @slow")] + [
        _case(i, "ZEBRA-1-OMEGA") for i in range(2, 5)
    ]
    await _runner(store, server, concurrency=2, timeout=20).run(cases)
    outcomes = {r.case_id: r.outcome for r in store.results()}
    assert outcomes["c0"] == "crash" and outcomes["c1"] == "crash"
    assert [outcomes[f"c{i}"] for i in range(2, 5)] == ["pass"] * 3
    assert server.launches == 2
    assert len(store.results()) == 5


async def test_consecutive_deaths_stop_the_sweep(tmp_path, server):
    store = _store(tmp_path)
    cases = [_case(i, "@die") for i in range(5)]
    with pytest.raises(SweepStopped, match="died 3 times in a row"):
        await _runner(store, server, concurrency=1, max_consecutive_deaths=3).run(cases)
    assert [r.outcome for r in store.results()] == ["crash"] * 3
    assert RunStore.open(store.path).run.relaunches == 2


async def test_without_handle_a_gone_server_stops_the_run_and_records_nothing(tmp_path, server):
    """An external server refusing connections is probed; refused every time, the run stops (ServerGone)
    and the case is not recorded as an error (a resume runs it)."""
    store = _store(tmp_path)
    server.stop()
    runner = _runner(store, server, handle=False, gone_probe_backoff_s=0.01)
    with pytest.raises(ServerGone, match="refuses connections.*3 probes in a row.*ConnectError"):
        await runner.run([_case(0, "x")])
    assert store.results() == []


class ReasoningCapture:
    """An --capture-indexer stand-in for a model that reasons for 60 tokens before answering: under a
    smaller budget its /generate answer is cut inside the <think> block (finish_reason length)."""

    reasoning_tokens = 60

    def __init__(self) -> None:
        self.budgets: list[int] = []

    async def complete(self, case: Case, max_tokens: int, give_up=None) -> Generation:
        self.budgets.append(max_tokens)
        cut = max_tokens < self.reasoning_tokens + 8
        text = "" if cut else case.expected[0]
        completion = Completion(
            text=text, reasoning="let me think " * 20, finish_reason="length" if cut else "stop"
        )
        return Generation(completion, f"<think>{completion.reasoning}</think>{text}", 10, 60, (), None)

    def coverage(self, case: Case, generation: Generation, outcome: str) -> None:
        return None


async def test_capture_path_raises_the_budget_and_resends_a_case_cut_in_its_reasoning(tmp_path, server):
    store = _store(tmp_path)
    capture = ReasoningCapture()
    adapted: list[str] = []
    runner = _runner(store, server, max_tokens=32, thinking_max_tokens=4096)
    runner.capture = capture
    runner.hooks.on_adapted = lambda name, line: adapted.append(name)
    await runner.run([_case(0, "The code is ZEBRA-1-OMEGA."), _case(1, "The code is ZEBRA-1-OMEGA.")])
    assert capture.budgets == [32, 4096, 4096]  # the cut case again at the thinking budget, then the next
    assert [r.outcome for r in store.results()] == ["pass", "pass"]
    assert [r.max_tokens for r in store.results()] == [4096, 4096]
    assert adapted == ["thinking_budget"]


async def test_a_resumed_run_that_learned_the_thinking_budget_starts_with_it(tmp_path, server):
    store = _store(tmp_path)
    capture = ReasoningCapture()
    runner = _runner(store, server, max_tokens=32, thinking_max_tokens=4096, thinking_learned=True)
    runner.capture = capture
    await runner.run([_case(0, "The code is ZEBRA-1-OMEGA.")])
    assert capture.budgets == [4096]
