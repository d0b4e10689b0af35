"""The layer rules of docs/DESIGN.md hold: `lint-imports` (import-linter, contracts in pyproject.toml)
passes on this tree, and fails, naming the contract and the import, on a copy with one rule broken."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("recall_eval", "suites", "launchers", "reports")
LINT = "import sys; from importlinter.cli import lint_imports_command; sys.exit(lint_imports_command())"


def lint_imports(root: Path) -> subprocess.CompletedProcess[str]:
    """lint-imports over the packages under `root` (they come first on the path: not the installed ones)."""
    env = {**os.environ, "PYTHONPATH": str(root), "COLUMNS": "300"}
    return subprocess.run(
        [sys.executable, "-c", LINT, "--no-cache", "--no-logo", str(root / "pyproject.toml")],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_the_tree_keeps_every_contract() -> None:
    done = lint_imports(ROOT)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "0 broken" in done.stdout and " kept" in done.stdout


@pytest.fixture(scope="module")
def tree_copy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The packages' Python files and pyproject.toml, copied (not the weights and data beside them)."""
    root = tmp_path_factory.mktemp("tree")
    for package in PACKAGES:
        for source in (ROOT / package).rglob("*.py"):
            target = root / source.relative_to(ROOT)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(source, target)
    shutil.copyfile(ROOT / "pyproject.toml", root / "pyproject.toml")
    return root


# (file, planted line, the contract it breaks, the import lint-imports must name)
PLANTED = [
    ("recall_eval/types.py", "from recall_eval import errors", "types.py imports nothing", "recall_eval.types -> recall_eval.errors"),
    ("recall_eval/stats.py", "import launchers.profiles", "the core imports no layer", "recall_eval.stats -> launchers.profiles"),
    ("recall_eval/scoring.py", "from recall_eval.api import options", "the core imports no layer", "recall_eval.scoring -> recall_eval.api.options"),
    ("suites/needle.py", "from reports import aggregates", "independent of each other", "suites.needle -> reports.aggregates"),
    ("launchers/planner.py", "import suites.needle", "independent of each other", "launchers.planner -> suites.needle"),
    ("reports/html.py", "from recall_eval.api import reading", "independent of each other", "reports.html -> recall_eval.api.reading"),
    ("recall_eval/cli/plan.py", "from launchers import planner", "only through recall_eval.api", "recall_eval.cli.plan -> launchers.planner"),
    ("launchers/lifecycle.py", "import launchers.reference.training.train", "training code is a leaf", "launchers.lifecycle -> launchers.reference.training.train"),
    ("reports/heatmap.py", "import httpx", "one HTTP layer", "reports.heatmap -> httpx"),
    ("recall_eval/transport.py", "import httptools", "the one user of httptools", "recall_eval.transport -> httptools"),
    ("launchers/sglang/bf16_indexer.py", "from launchers.sglang_gpu_checks import kernel_checks", "patch ships alone", "launchers.sglang.bf16_indexer -> launchers.sglang_gpu_checks.kernel_checks"),
]  # fmt: skip


@pytest.mark.parametrize(("path", "line", "contract", "named"), PLANTED, ids=[p[0] for p in PLANTED])
def test_a_planted_violation_breaks_its_contract(
    tree_copy: Path, path: str, line: str, contract: str, named: str
) -> None:
    file = tree_copy / path
    original = file.read_text()
    file.write_text(original + f"\n{line}  # planted\n")
    try:
        done = lint_imports(tree_copy)
    finally:
        file.write_text(original)
    assert done.returncode == 1, done.stdout + done.stderr
    broken = done.stdout.split("Broken contracts", 1)[-1]
    assert contract in broken and named in broken, done.stdout  # (a chain through it may break others)
