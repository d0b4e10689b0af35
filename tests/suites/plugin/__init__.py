"""Install tests/suites/plugin/tiny_recall_suite.py as a package would be: the module and a dist-info
folder with its entry points, in a temp folder that goes on sys.path or PYTHONPATH (no pip, no network)."""

from __future__ import annotations

import shutil
from pathlib import Path

HERE = Path(__file__).parent


def install_plugin(folder: Path, entry: str = "tiny_recall_suite:SUITES", name: str = "tiny") -> Path:
    """`folder` holding tiny_recall_suite and its metadata, entry point `name = entry` in the
    recall_eval.suites group; returns folder."""
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copy(HERE / "tiny_recall_suite.py", folder / "tiny_recall_suite.py")
    info = folder / "tiny_recall_suite-0.1.dist-info"
    info.mkdir(exist_ok=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: tiny-recall-suite\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(f"[recall_eval.suites]\n{name} = {entry}\n")
    return folder
