from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from recall_eval.errors import BadInput
from suites.config_vocab import services
from suites.training_corpus import KIND_BUILDERS, iter_training_examples, main
from suites.values import CODE_RE, code_words, key_names

IMPLEMENTED = tuple(KIND_BUILDERS)


def test_examples_are_deterministic_and_prefix_stable() -> None:
    first = list(iter_training_examples(1, 20, 30, 300, IMPLEMENTED))
    assert first == list(iter_training_examples(1, 20, 30, 300, IMPLEMENTED))
    assert first[:5] == list(iter_training_examples(1, 5, 30, 300, IMPLEMENTED))
    assert first != list(iter_training_examples(2, 20, 30, 300, IMPLEMENTED))


def test_examples_use_only_the_train_pools() -> None:
    eval_words = {w.lower() for w in code_words("eval") + key_names("eval") + services("eval")}
    kinds = []
    for example in iter_training_examples(0, 300, 0, 400):
        kinds.append(example.kind)
        assert example.messages[-1]["role"] == "user"
        content = "\n".join(m["content"] for m in example.messages)
        assert content.count(example.answer) == 1
        if example.kind != "config":
            assert CODE_RE.fullmatch(example.answer)
            first, _, second = example.answer.split("-")
            assert first in code_words("train") and second in code_words("train")
        words = set(re.findall(r"[a-z]+", content.lower()))
        assert not words & eval_words
    assert kinds[:3] == ["needle", "config", "multiturn"] and len(set(kinds)) == 3


def test_filler_size_stays_in_range() -> None:
    for example in iter_training_examples(3, 50, 100, 200, ("needle",)):
        words = len(example.messages[0]["content"].split())
        assert 100 + 10 <= words <= 200 + 40  # filler plus fact sentence and question


def test_unknown_or_missing_kinds_are_clear_errors() -> None:
    with pytest.raises(BadInput, match="not implemented yet; available"):
        list(iter_training_examples(0, 1, 10, 20, ("needle", "poetry")))
    with pytest.raises(BadInput, match="min-words"):
        list(iter_training_examples(0, 1, 30, 20, ("needle",)))


def test_config_kind_can_be_restricted_to_some_formats() -> None:
    fences = {
        e.messages[0]["content"].split("\n", 1)[0]
        for e in iter_training_examples(5, 30, 20, 80, ("config:env+sysctl",))
    }
    assert fences == {"```env", "```conf"}  # the env and sysctl formats only, both drawn
    everything = {
        e.messages[0]["content"].split("\n", 1)[0] for e in iter_training_examples(5, 60, 20, 80, ("config",))
    }
    assert len(everything) > 2
    with pytest.raises(BadInput, match="config:FORMAT"):
        list(iter_training_examples(0, 1, 10, 20, ("config:xml",)))


def test_command_line_writes_jsonl(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "corpus.jsonl"
    argv = ["--out", str(out), "--n", "12", "--seed", "4", "--min-words", "20", "--max-words", "80"]
    assert main([*argv, "--kinds", ",".join(IMPLEMENTED)]) == 0
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(rows) == 12
    assert set(rows[0]) == {"messages", "answer", "kind"}
    assert all(row["answer"] in "".join(m["content"] for m in row["messages"]) for row in rows)
    assert {row["kind"] for row in rows} == set(IMPLEMENTED)
    assert main([*argv, "--kinds", "poetry"]) == 2
    assert "not implemented yet" in capsys.readouterr().err
