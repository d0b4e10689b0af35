"""The stored files beside runs (a baseline, study.json, a cliff search's search.json) follow the format
rules of run.json: a version, fields a newer writer added kept through a rewrite, one line naming the
file for a torn or invalid one, and a newer format refused with "upgrade recall-eval"."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from recall_eval.baseline_store import read_baseline, write_baseline
from recall_eval.cliff_store import SEARCH_FILE, SearchBatch, SearchManifest, read_search, write_search
from recall_eval.errors import UserError
from recall_eval.study_store import (
    STUDY_FILE,
    CellPlan,
    StudyCell,
    StudyManifest,
    read_study,
    write_study_file,
)
from tests.recall_eval.test_baseline_gate import _baseline, _result

SEARCH = SearchManifest(
    search_id="search-x", label="fp8", low=1000, high=8000, budget=8, batch_trials=2, threshold=0.9,
    batches=(SearchBatch(length=1000, batch=0, run_dir="b0", passes=2, answered=2, cases=2),),
)  # fmt: skip
STUDY = StudyManifest(
    study_id="study-x", created_at=1.0, axes={"dtype": ["fp8", "bf16"]}, baseline="dtype=fp8",
    cells=(StudyCell(label="dtype=fp8", values={"dtype": "fp8"},
                     plan=CellPlan(fits=None, reason="not planned", sequence_tokens=100)),),
)  # fmt: skip


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ('{"format_version": 1, "batches": [', "is not a valid cliff search file (not JSON"),
        ('["a list"]', "is not a valid cliff search file (not a JSON object)"),
        ('{"format_version": 1, "search_id": 3}', "is not a valid cliff search file (search_id: "),
        ('{"format_version": 2}', "cliff search file format 2 is newer than this recall-eval reads (1 and older); "
         "upgrade recall-eval"),
    ],
)  # fmt: skip
def test_a_damaged_or_newer_search_file_is_one_line_naming_it(tmp_path: Path, text: str, says: str) -> None:
    """read_search had no version check and no error handling: a torn search.json was a bare
    JSONDecodeError (ValidationError), a newer one read as if it were this format."""
    (tmp_path / SEARCH_FILE).write_text(text)
    with pytest.raises(UserError) as err:
        read_search(tmp_path)
    line = str(err.value)
    assert says in line and str(tmp_path / SEARCH_FILE) in line and "\n" not in line
    assert read_search(tmp_path / "none") is None  # no search yet: nothing stored, not an error


def _with_additions(path: Path, top: dict, nested: str) -> None:
    document = json.loads(path.read_text())
    document.update(top)
    document[nested][0]["added_later"] = "kept"
    path.write_text(json.dumps(document))


def test_fields_a_newer_writer_added_are_kept_through_a_rewrite(tmp_path: Path) -> None:
    """A search, a study and a baseline read and written back keep the fields they do not know, top-level
    and nested (they were dropped: extra="ignore")."""
    search_dir = tmp_path / "search"
    _with_additions(write_search(search_dir, SEARCH), {"gpu_hours": 3.5}, "batches")
    write_search(search_dir, read_search(search_dir))
    document = json.loads((search_dir / SEARCH_FILE).read_text())
    assert document["gpu_hours"] == 3.5 and document["batches"][0]["added_later"] == "kept"

    study_dir = tmp_path / "study"
    _with_additions(write_study_file(study_dir, STUDY), {"owner": "team-a"}, "cells")
    write_study_file(study_dir, read_study(study_dir), {"rendered_at": 2.0})
    document = json.loads((study_dir / STUDY_FILE).read_text())
    assert document["owner"] == "team-a" and document["cells"][0]["added_later"] == "kept"
    assert document["rendered_at"] == 2.0

    path = write_baseline(tmp_path / "b.json", _baseline([_result("a", "needle", "pass")]))
    _with_additions(path, {"signed_by": "ci"}, "cases")
    write_baseline(path, read_baseline(path))
    document = json.loads(path.read_text())
    assert document["signed_by"] == "ci" and document["cases"][0]["added_later"] == "kept"
