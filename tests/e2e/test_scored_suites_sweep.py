"""The must-show runs: `recall-eval sweep --suite ruler --lengths 4096,8192` and `--suite mrcr` on the
embedded default (the reference engine, launched and stopped by the sweep) end with a report that holds
one heatmap per task, the RULER-style task x length table and per-task effective lengths."""

from __future__ import annotations

from pathlib import Path

import pytest

from recall_eval.frame import results_frame
from suites.mrcr import NEEDLE_COUNTS
from suites.ruler import TASKS
from tests.e2e.cli import run_cli
from tests.e2e.reference_server import free_port

pytestmark = pytest.mark.slow


def _sweep(tmp_path: Path, suite: str, *extra: str) -> Path:
    completed = run_cli(
        "sweep", "--suite", suite, "--lengths", "4096,8192", "--depths", "50", "--trials", "1",
        "--port", str(free_port()), "--out", str(tmp_path / suite), *extra, timeout=600,
    )  # fmt: skip
    assert completed.returncode in (0, 4), completed.stderr
    assert "score " in completed.stdout + completed.stderr  # the console states a score, not a recall
    return Path(completed.stdout.strip().splitlines()[-1]).parent


def test_ruler_family_end_to_end_on_the_embedded_default(tmp_path):
    run_dir = _sweep(tmp_path, "ruler", "--max-tokens", "16")
    frame = results_frame(run_dir)
    assert set(frame["task"]) == set(TASKS) and len(frame) == 2 * len(TASKS)
    assert frame["counted"].all() and frame["score"].between(0, 1).all()
    assert (frame["metric"] == "string_match_all").all()
    # lengths are fitted in the server's own tokens (tolerance 1%)
    assert ((frame["calibrated_prompt_tokens"] - frame["target_tokens"]).abs() <= 82).all()
    html = (run_dir / "report.html").read_text()
    assert 'id="task-table"' in html and all(f'data-task="{task}"' in html for task in TASKS)
    assert "effective length (RULER 85.6)" in html
    assert 'id="scored-only"' in html  # no recall card for a run of scored suites only
    assert len(list(run_dir.glob("heatmap-*.png"))) == len(TASKS)


def test_mrcr_family_end_to_end_with_its_floor(tmp_path):
    run_dir = _sweep(tmp_path, "mrcr", "--max-tokens", "48")
    frame = results_frame(run_dir)
    assert set(frame["task"]) == {f"mrcr_{n}" for n in NEEDLE_COUNTS}
    assert (frame["metric"] == "mrcr").all() and frame["param_floor"].between(0, 1).all()
    html = (run_dir / "report.html").read_text()
    assert "random floor" in html and "51% / 27% / 15%" in html
