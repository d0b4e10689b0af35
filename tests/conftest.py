"""Project-wide test settings: every test gets its own run store (RECALL_EVAL_HOME); tests marked
gpu, browser or sglang are skipped, with the reason, where CUDA, Chromium or sglang==0.5.23 is absent
(on the accelerator machine and in CI they run)."""

from __future__ import annotations

import asyncio
import importlib.metadata
import importlib.util
import shutil
from pathlib import Path

import pytest

SGLANG_VERSION = "0.5.23"


def _cuda() -> str | None:
    try:
        import torch
    except ImportError:
        return "torch is not installed"
    return None if torch.cuda.is_available() else "needs CUDA (run on the accelerator machine)"


def _chromium() -> str | None:
    if shutil.which("chromium") or Path("/usr/bin/chromium").exists():
        return None
    return "needs headless Chromium: apt-get install chromium"


def _sglang() -> str | None:
    try:
        found = importlib.util.find_spec("sglang") is not None
    except (ImportError, ValueError):
        found = False
    if not found:
        return f"needs sglang=={SGLANG_VERSION}: pip install --no-deps sglang=={SGLANG_VERSION} (scripts/test.sh)"
    version = importlib.metadata.version("sglang")
    if version != SGLANG_VERSION:
        return f"needs sglang=={SGLANG_VERSION}, found {version}"
    return None


MISSING = {"gpu": _cuda, "browser": _chromium, "sglang": _sglang}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    reasons: dict[str, str | None] = {}
    for item in items:
        for name, check in MISSING.items():
            if item.get_closest_marker(name) is None:
                continue
            if name not in reasons:
                reasons[name] = check()
            if reasons[name] is not None:
                item.add_marker(pytest.mark.skip(reason=f"[{name}] {reasons[name]}"))


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
