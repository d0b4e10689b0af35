"""Project-wide test settings: every test gets its own run store (RECALL_EVAL_HOME); tests marked
gpu, browser or sglang are skipped, with the reason, where CUDA, Chromium or sglang==0.5.23 is absent,
except that under CI=true a missing Chromium or sglang fails them (tests/prerequisites.py)."""

from __future__ import annotations

import asyncio
import signal

import pytest

from tests import prerequisites

_MISSING = pytest.StashKey[tuple[str, str]]()


def _hangup_ignored_here(signum: int, frame: object) -> None:
    """pytest itself keeps ignoring hangups (as nohup asked); a handler, unlike SIG_IGN, is reset to
    the default in every program the tests start."""


def pytest_configure(config: pytest.Config) -> None:
    # A shell without job control starts `cmd &` with SIGINT ignored, nohup ignores SIGHUP, and an
    # ignored signal stays ignored in every child: the Ctrl-C and hang-up tests (to pytest itself, to
    # the CLI, to a harness) would then test nothing a user does. A Python handler is reset on exec.
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    if signal.getsignal(signal.SIGHUP) is signal.SIG_IGN:
        signal.signal(signal.SIGHUP, _hangup_ignored_here)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    reasons: dict[str, str | None] = {}
    for item in items:
        for name, check in prerequisites.CHECKS.items():
            if item.get_closest_marker(name) is None:
                continue
            if name not in reasons:
                reasons[name] = check()
            reason = reasons[name]
            if reason is None:
                continue
            if prerequisites.verdict(name, reason) == "skip":
                item.add_marker(pytest.mark.skip(reason=f"[{name}] {reason}"))
            else:
                item.stash[_MISSING] = (name, reason)


def pytest_runtest_setup(item: pytest.Item) -> None:
    if _MISSING in item.stash:
        prerequisites.missing(*item.stash[_MISSING])


@pytest.fixture(autouse=True)
def _isolated_run_home(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RECALL_EVAL_HOME", str(tmp_path_factory.mktemp("runs")))


@pytest.hookimpl(optionalhook=True)  # pytest-asyncio's hook: absent where it is not installed (the GPU host)
def pytest_asyncio_loop_factories(config: pytest.Config, item: pytest.Item):
    """Async tests run on asyncio's loop; those marked both_loops also on uvloop, the CLI's loop
    (recall_eval.event_loop)."""
    factories = {"asyncio": asyncio.new_event_loop}
    if item.get_closest_marker("both_loops") is not None:
        import uvloop

        factories["uvloop"] = uvloop.new_event_loop
    return factories
