"""The teacher-forced answer probe lines predictions up with the answer tokens: on needle documents
the shipped model copies every code token, so a probe off by one position would score far lower."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from launchers.reference.engine_api import WEIGHTS_DIR
from launchers.reference.training.answer_probe import probe


def test_shipped_weights_copy_needle_codes_at_every_answer_position() -> None:
    result = probe(WEIGHTS_DIR, "needle", 3, (60, 90))
    assert result["teacher_forced_exact"] == 3
    by_position = result["accuracy_by_answer_position"]  # as long as the longest answer
    assert set(by_position) == {1.0} and len(by_position) >= len(result["example"]["target"])
    assert result["example"]["argmax"] == result["example"]["target"]


def test_command_line_writes_one_result_per_kind(tmp_path: Path) -> None:
    out = tmp_path / "probe.json"
    args = ["--weights", str(WEIGHTS_DIR), "--kinds", "needle,config:sysctl", "--n", "1", "--words", "40,60"]
    subprocess.run(
        [sys.executable, "-m", "launchers.reference.training.answer_probe", *args, "--out", str(out)],
        check=True,
        timeout=300,
    )
    results = json.loads(out.read_text())
    assert [r["kind"] for r in results] == ["needle", "config:sysctl"]
    assert all(r["documents"] == 1 and r["accuracy_by_answer_position"] for r in results)
