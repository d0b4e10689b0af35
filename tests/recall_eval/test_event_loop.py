"""The loop sweeps run on (recall_eval.event_loop): uvloop when installed, asyncio's on request."""

from __future__ import annotations

import asyncio

import pytest

from recall_eval import event_loop
from recall_eval.api.versions import reuse_key_of, versions
from recall_eval.types import RunSpec


async def _loop_module() -> str:
    return type(asyncio.get_running_loop()).__module__


def test_sweeps_run_on_uvloop_unless_asyncio_is_asked_for(monkeypatch):
    pytest.importorskip("uvloop", reason="uvloop is a dependency on Linux and macOS")
    monkeypatch.delenv(event_loop.LOOP_ENV, raising=False)
    assert event_loop.run(_loop_module()).startswith("uvloop") and event_loop.loop_name() == "uvloop"
    monkeypatch.setenv(event_loop.LOOP_ENV, "asyncio")
    assert event_loop.run(_loop_module()).startswith("asyncio") and event_loop.loop_name() == "asyncio"


def test_a_run_records_its_loop_and_reuse_does_not_depend_on_it(monkeypatch):
    monkeypatch.setenv(event_loop.LOOP_ENV, "asyncio")
    assert versions()["event_loop"] == "asyncio"
    spec = RunSpec(lengths=(400,), depths=(50.0,))
    on_asyncio = reuse_key_of(spec)
    monkeypatch.delenv(event_loop.LOOP_ENV)
    assert reuse_key_of(spec) == on_asyncio and "event_loop" not in on_asyncio


def test_ctrl_c_cancels_the_main_task_on_either_loop(monkeypatch):
    """event_loop.run keeps asyncio.run's Ctrl-C handling: the task is cancelled (its cleanup runs),
    then KeyboardInterrupt reaches the caller."""
    import os
    import signal

    for loop in ("asyncio", "uvloop"):
        monkeypatch.setenv(event_loop.LOOP_ENV, loop)
        cleaned: list[bool] = []

        async def interrupted(cleaned: list[bool]) -> None:
            asyncio.get_running_loop().call_later(0.05, os.kill, os.getpid(), signal.SIGINT)
            try:
                await asyncio.sleep(5)
            finally:
                cleaned.append(True)

        with pytest.raises(KeyboardInterrupt):
            event_loop.run(interrupted(cleaned))
        assert cleaned == [True], loop
