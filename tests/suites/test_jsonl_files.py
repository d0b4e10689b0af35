"""File suites: which task and metric a RULER file gets, folders of RULER's output, malformed rows."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import suites
from recall_eval.errors import BadInput
from suites.jsonl_files import file_recipes

FILES = Path(__file__).with_name("ruler_files")


def _write(path: Path, rows: list[dict]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def test_task_from_folder_file_name_or_given_and_qa_is_string_match_part(tmp_path):
    row = {"input": "Q?", "outputs": ["a", "b"], "length": 10, "answer_prefix": " Answer:"}
    by_folder = _write(tmp_path / "qa_1" / "validation.jsonl", [row])
    by_name = _write(tmp_path / "vt.jsonl", [row])
    (case,) = [r.render(0) for r in file_recipes(f"ruler-jsonl:{by_folder}")]
    assert case.params["task"] == "qa_1" and case.metric == "string_match_part"
    assert case.messages[0].content == "Q? Answer:" and case.suite == "ruler-jsonl:qa_1"
    assert file_recipes(f"ruler-jsonl:{by_name}")[0].render(0).params["task"] == "vt"
    named = file_recipes(f"ruler-jsonl:niah_single_2={by_name}")[0].render(0)
    assert named.params["task"] == "niah_single_2" and named.metric == "string_match_all"


def test_a_folder_of_ruler_output_names_every_file_in_it():
    names = suites.parse_suite_names(f"ruler-jsonl:{FILES}")
    assert [Path(n.split(":", 1)[1]).parent.name for n in names] == sorted(
        ["cwe", "fwe", "niah_multikey_2", "niah_multikey_3", "niah_single_1", "vt"]
    )
    assert all(Path(n.split(":", 1)[1]).is_absolute() for n in names)


@pytest.mark.parametrize(
    ("form", "rows", "fragment"),
    [
        ("ruler-jsonl", [{"prompt": "x", "expected": "y"}], "not a RULER prepared file"),
        ("jsonl", [{"expected": "y"}], "give `prompt`"),
        ("jsonl", [{"prompt": "x", "expected": []}], "expected answers"),
        ("jsonl", [{"prompt": "x", "expected": "y", "metric": "bleu"}], "unknown metric 'bleu'"),
    ],
)
def test_malformed_rows_are_one_line_bad_input(tmp_path, form, rows, fragment):
    path = _write(tmp_path / "f.jsonl", rows)
    with pytest.raises(BadInput, match=fragment):
        suites.parse_suite_names(f"{form}:{path}")


def test_not_json_names_the_line(tmp_path):
    path = tmp_path / "f.jsonl"
    path.write_text('{"prompt": "x", "expected": "y"}\nnot json\n')
    with pytest.raises(BadInput, match="line 2 is not JSON"):
        suites.parse_suite_names(f"jsonl:{path}")
