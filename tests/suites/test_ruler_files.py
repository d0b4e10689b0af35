"""RULER's own prepared files through `recall-eval sweep --suite ruler-jsonl:...`: the scores equal
RULER's evaluation of the same predictions (tests/suites/ruler_files/README.md says how they were made)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from recall_eval.frame import results_frame
from recall_eval.metrics import ruler_task_score
from tests.e2e.cli import run_cli
from tests.e2e.served_process import start_scripted

FILES = Path(__file__).with_name("ruler_files")
TASKS = ("niah_single_1", "niah_multikey_2", "niah_multikey_3", "vt", "cwe", "fwe")


def _rows(task: str) -> list[dict]:
    return [json.loads(line) for line in (FILES / task / "validation.jsonl").read_text().splitlines() if line]


@pytest.fixture
def scripted(tmp_path):
    predictions = json.loads((FILES / "predictions.json").read_text())
    # each row's prompt ends with its own input's last 200 characters plus its answer prefix: a unique key
    answers = {
        (row["input"] + row["answer_prefix"])[-260:]: predictions[task][index]
        for task in TASKS
        for index, row in enumerate(_rows(task))
    }
    server = start_scripted(answers, tmp_path)
    yield server
    server.stop()


def test_ruler_files_score_as_ruler_scores_them(scripted, tmp_path):
    suite = ",".join(f"ruler-jsonl:{FILES / task / 'validation.jsonl'}" for task in TASKS)
    out = tmp_path / "runs"
    completed = run_cli("sweep", "--base-url", scripted.base_url, "--suite", suite, "--out", str(out))
    assert completed.returncode in (0, 3, 4), completed.stderr
    (run_dir,) = [p for p in out.iterdir() if (p / "run.json").is_file()]
    frame = results_frame(run_dir)
    assert len(frame) == 2 * len(TASKS) and frame["counted"].all()
    expected = json.loads((FILES / "expected_scores.json").read_text())
    got = {task: ruler_task_score(frame[frame["task"] == task]["score"].tolist()) for task in TASKS}
    assert got == expected
    # the file's own length figure is kept beside the server's count
    niah = frame[frame["task"] == "niah_single_1"].sort_values("param_row")
    assert niah["target_tokens"].tolist() == [row["length"] for row in _rows("niah_single_1")]
    assert niah["prompt_tokens"].notna().all()
    html = (run_dir / "report.html").read_text()
    assert "ruler-jsonl:niah_single_1" in html
    assert 'id="task-table"' in html and all(f'data-task="{task}"' in html for task in TASKS)


def test_a_file_that_is_not_ruler_is_one_line_exit_2(tmp_path):
    bad = tmp_path / "x.jsonl"
    bad.write_text('{"prompt": "hi", "expected": ["a"]}\n')
    completed = run_cli("sweep", "--base-url", "http://127.0.0.1:9", "--suite", f"ruler-jsonl:{bad}")
    assert completed.returncode == 2
    assert "not a RULER prepared file" in completed.stderr and "Traceback" not in completed.stderr


def test_generic_jsonl_rows_are_scored_by_their_named_metric(tmp_path):
    rows = [
        {"prompt": "Q-ALPHA: which cities?", "expected": ["Paris", "Lyon"], "task": "cities", "length": 50},
        {"prompt": "Q-BETA: which city?", "expected": ["Paris", "Lyon"], "metric": "string_match_part"},
        {
            "messages": [
                {"role": "user", "content": "Write a poem."},
                {"role": "assistant", "content": "abcd"},
                {"role": "user", "content": "Q-GAMMA: prepend PFX to the 1st poem."},
            ],
            "expected": "PFXabcd",
            "metric": "mrcr",
            "prefix": "PFX",
        },
    ]
    data = tmp_path / "mine.jsonl"
    data.write_text("".join(json.dumps(row) + "\n" for row in rows))
    server = start_scripted({"Q-ALPHA": "paris, maybe", "Q-BETA": "LYON", "Q-GAMMA": "PFXabcf"}, tmp_path)
    try:
        out = tmp_path / "runs"
        completed = run_cli(
            "sweep", "--base-url", server.base_url, "--suite", f"jsonl:{data}", "--out", str(out)
        )
    finally:
        server.stop()
    assert completed.returncode in (0, 3, 4), completed.stderr
    (run_dir,) = [p for p in out.iterdir() if (p / "run.json").is_file()]
    frame = results_frame(run_dir).sort_values("param_row")
    # by hand: 1 of 2 references; any reference found; SequenceMatcher("abcf", "abcd") = 2*3/8
    assert frame["score"].tolist() == [0.5, 1.0, 0.75]
    assert frame["metric"].tolist() == ["string_match_all", "string_match_part", "mrcr"]
    assert frame["task"].tolist() == ["cities", "mine", "mine"] and frame["target_tokens"].iloc[0] == 50
