"""Where the tool writes, through the command line: `export --out` to a folder or into a folder that
does not exist is one line (exit 2) and leaves nothing behind; `sweep --out` naming an existing run
or compare directory is refused before anything starts (it used to nest a run `runs` never shows);
two `serve` log folders made in the same second are two folders."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from recall_eval.api import servers
from tests.e2e.cli import error_lines, run_cli
from tests.reports.sample_run import build_sample_run


@pytest.fixture
def run_dir(tmp_path) -> Path:
    return build_sample_run(tmp_path / "runs")


def _only_line(completed) -> str:
    assert "Traceback" not in completed.stderr, completed.stderr
    (line,) = error_lines(completed)
    return line


@pytest.mark.parametrize("fmt", ["csv", "parquet"])
def test_export_to_a_folder_names_the_file_to_give(run_dir, tmp_path, fmt):
    folder = tmp_path / "exports"
    folder.mkdir()
    completed = run_cli("export", str(run_dir), "--format", fmt, "--out", str(folder))
    assert completed.returncode == 2
    line = _only_line(completed)
    assert f"--out {folder} is a directory" in line and f"results.{fmt}" in line, line
    assert list(folder.iterdir()) == [] and list(tmp_path.glob(".*tmp")) == []  # no stray .tmp


def test_export_into_a_missing_folder_says_to_create_it(run_dir, tmp_path):
    out = tmp_path / "no" / "such" / "results.csv"
    completed = run_cli("export", str(run_dir), "--out", str(out))
    assert completed.returncode == 2
    line = _only_line(completed)
    assert "does not exist" in line and f"mkdir -p {out.parent}" in line, line
    assert not (tmp_path / "no").exists()


def test_export_writes_the_file_whole(run_dir, tmp_path):
    out = tmp_path / "results.csv"
    completed = run_cli("export", str(run_dir), "--out", str(out))
    assert completed.returncode == 0, completed.stderr
    assert out.read_text().count("\n") == 1 + 40  # the header and the sample run's 40 cases
    assert [path.name for path in tmp_path.iterdir() if path.name.endswith(".tmp")] == []


def test_sweep_out_an_existing_run_directory_is_refused_before_anything_starts(run_dir, tmp_path):
    completed = run_cli(
        "sweep", "--out", str(run_dir), "--base-url", "http://127.0.0.1:9", "--lengths", "200"
    )
    assert completed.returncode == 2
    line = _only_line(completed)
    assert "is a run directory" in line and f"recall-eval sweep --resume {run_dir}" in line, line
    assert "cannot reach" not in line  # refused before the server is asked
    assert sorted(path.name for path in run_dir.iterdir() if path.is_dir()) == []  # nothing nested


def test_two_serve_log_folders_in_the_same_second_differ(tmp_path, monkeypatch):
    """Two serves started in the same second get two folders (each its own logs and servers.json)."""
    monkeypatch.setenv("RECALL_EVAL_HOME", str(tmp_path))
    frozen = time.gmtime(1_800_000_000)
    monkeypatch.setattr(servers.time, "gmtime", lambda *args: frozen)
    first, second = servers.serve_log_dir("reference"), servers.serve_log_dir("reference")
    assert first != second and first.is_dir() and second.is_dir()
    assert second.name == first.name + "-2"
