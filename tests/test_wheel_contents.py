"""What the wheel ships: the served reference weights and the SGLang runtime patch, not the offline training
code, its checkpoints or the patch's GPU validation and benchmarks."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _tracked_copy(dest: Path) -> Path:
    """The checkout's tracked files (what a clean clone builds from) copied to dest."""
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("needs a git checkout to list the tracked files")
    files = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, check=True, capture_output=True).stdout.split(
        b"\0"
    )
    for name in filter(None, files):
        rel = Path(name.decode())
        if not (ROOT / rel).is_file():  # deleted in the working tree, not yet committed
            continue
        (dest / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / rel, dest / rel)
    return dest


@pytest.mark.slow
def test_wheel_ships_weights_but_not_training(tmp_path: Path) -> None:
    """Fails if launchers/reference/training (code, logs, stage checkpoints) or the SGLang patch's GPU
    checks (launchers/sglang_gpu_checks: validation, benchmarks, their H200 tables) get into the wheel, or
    if the shipped weights the engine serves or the SGLang runtime patch fall out of it."""
    src = _tracked_copy(tmp_path / "src")
    out = tmp_path / "wheel"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "-q",
            "--no-deps",
            "--no-build-isolation",
            "-w",
            str(out),
            ".",
        ],
        cwd=src,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    (wheel,) = out.glob("recall_eval-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    assert not [n for n in names if n.startswith("launchers/reference/training")]
    for shipped in ("config.json", "model.safetensors", "tokenizer.json"):
        assert f"launchers/reference/weights/{shipped}" in names
    assert "launchers/reference/engine.py" in names and "launchers/dsa/indexer.py" in names
    assert not [n for n in names if n.endswith(".safetensors") and "/weights/" not in n]
    assert not [n for n in names if n.startswith("launchers/sglang_gpu_checks")]
    for runtime in (
        "bf16_index_k.py",
        "bf16_indexer.py",
        "bf16_runtime.py",
        "kernels/paged_logits.py",
        "patch/sitecustomize.py",
    ):
        assert f"launchers/sglang/{runtime}" in names
