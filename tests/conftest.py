"""Project-wide test settings: every test gets its own run store (RECALL_EVAL_HOME)."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _isolated_run_home(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RECALL_EVAL_HOME", str(tmp_path_factory.mktemp("runs")))
