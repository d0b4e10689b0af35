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


# Every value shape an askable family makes (suites/config_vocab.py), to count look-alikes.
FAMILY_SHAPES = {
    "port": re.compile(r"(?<![\w.-])\d{5}(?![\w.])"),
    "timeout": re.compile(r"\b\d{5}ms\b"),
    "host": re.compile(r"\b[a-z]+-[a-z0-9]{5}\.[a-z]+-[a-z]+\.internal\b"),
    "ident": re.compile(r"\b(?:cli|tnt|cls|dep|bkt|sig)_[a-z0-9]{8}\b"),
    "path": re.compile(r"/var/lib/[a-z]+/[a-z0-9]{6}\b"),
}


def _shapes(text: str) -> dict[str, list[str]]:
    return {family: shape.findall(text) for family, shape in FAMILY_SHAPES.items()}


def test_config_curriculum_levels_make_the_asked_value_the_only_one_of_its_shape() -> None:
    seen_other_families = seen_lookalikes = 0
    for level in ("copy", "shapes", "lookalike"):
        for example in iter_training_examples(9, 40, 200, 400, (f"config-{level}",)):
            found = _shapes(example.messages[0]["content"])
            family = next(f for f, values in found.items() if example.answer in values)
            others = sum(len(v) for f, v in found.items() if f != family)
            if level == "copy":  # the one high-entropy value in the document
                assert found[family] == [example.answer] and others == 0
            elif level == "shapes":  # other families' values, none of the asked shape
                assert found[family] == [example.answer]
                seen_other_families += others > 0
            else:
                seen_lookalikes += len(found[family]) > 1
    assert seen_other_families > 30 and seen_lookalikes > 20
    fences = {
        e.messages[0]["content"].split("\n", 1)[0]
        for e in iter_training_examples(5, 30, 20, 80, ("config-copy:toml+ini",))
    }
    assert fences == {"```toml", "```ini"}
    for bad in ("config-hard", "needle-copy", "config-copy:xml"):
        with pytest.raises(BadInput, match="curriculum level"):
            list(iter_training_examples(0, 1, 10, 20, (bad,)))


def test_command_line_writes_jsonl(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "corpus.jsonl"
    argv = ["--out", str(out), "--n", "12", "--seed", "4", "--min-words", "20", "--max-words", "80"]
    assert main([*argv, "--kinds", ",".join(IMPLEMENTED)]) == 0
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(rows) == 12
    assert set(rows[0]) == {"messages", "answer", "kind"}
    # every part of the answer is in the document (RULER: each asked value; mrcr: prefix and answer)
    for row in rows:
        text = "".join(m["content"] for m in row["messages"])
        parts = row["answer"].split(", ") if row["kind"] == "ruler-niah" else [row["answer"]]
        if row["kind"] == "mrcr":
            parts = [row["answer"][:10], row["answer"][10:]]
        assert all(part in text for part in parts), row["kind"]
    assert {row["kind"] for row in rows} == set(IMPLEMENTED)
    assert main([*argv, "--kinds", "poetry"]) == 2
    assert "not implemented yet" in capsys.readouterr().err


def test_needle_values_kind_puts_a_config_shaped_value_where_the_code_was() -> None:
    needles = list(iter_training_examples(6, 40, 60, 120, ("needle",)))
    bridged = list(iter_training_examples(6, 40, 60, 120, ("needle-values",)))
    families = set()
    for needle, bridge in zip(needles, bridged, strict=True):
        content = bridge.messages[0]["content"]
        family = next(f for f, shape in FAMILY_SHAPES.items() if shape.fullmatch(bridge.answer))
        families.add(family)
        assert content.count(bridge.answer) == 1 and not CODE_RE.search(content)
        # the same document otherwise: the needle's code swapped for the value
        assert content == needle.messages[0]["content"].replace(needle.answer, bridge.answer)
    assert families == set(FAMILY_SHAPES)


def test_needle_multikey_kind_adds_other_keys_codes_in_the_same_template() -> None:
    counts = []
    for example in iter_training_examples(4, 40, 80, 160, ("needle-multikey",)):
        haystack, question = example.messages[0]["content"].rsplit("\n\n", 1)
        codes = CODE_RE.findall(haystack)
        assert codes.count(example.answer) == 1 and len(set(codes)) == len(codes)
        asked_key = next(k for k in key_names("train") if k in question)
        sentences = [s for s in re.split(r"(?<=\.) ", haystack) if CODE_RE.search(s)]
        # every code sentence is the asked one's template with another key, so only the name tells them apart
        masked = {re.sub(CODE_RE, "#", s) for s in sentences}
        assert sum(asked_key in s for s in sentences) == 1 and len(masked) == len(codes)
        counts.append(len(codes))
    assert set(counts) >= {2, 3, 4}


def test_config_sections_level_repeats_only_the_asked_key_in_other_sections() -> None:
    repeats = []
    for example in iter_training_examples(12, 40, 100, 200, ("config-sections:sysctl+toml+yaml",)):
        content = example.messages[0]["content"]
        key = _asked_key(content.rsplit("\n\n", 1)[-1])
        found = _shapes(content)
        family = next(f for f, values in found.items() if example.answer in values)
        assert found[family].count(example.answer) == 1
        for value in found[family]:  # every value of the asked shape sits under the asked key
            line = next(line for line in content.splitlines() if value in line)
            assert key in line, (key, line)
        repeats.append(len(found[family]) - 1)
    assert min(repeats) >= 1 and max(repeats) >= 3  # sibling sections and the other top-level name


def _asked_key(question: str) -> str:
    return re.search(r"\b[a-z_]+\.[a-z_]+\.([a-z_]+)\b", question).group(1)  # top.sub.KEY


def _asked_key_lines(kind: str, n: int) -> list[int]:
    """Per example: how many document lines hold the asked key (yaml/toml: the key is literal there)."""
    counts = []
    for example in iter_training_examples(12, n, 100, 200, (kind,)):
        document, question = example.messages[0]["content"].rsplit("\n\n", 1)
        key = _asked_key(question)
        counts.append(sum(re.search(rf"\b{key}\b", line) is not None for line in document.splitlines()))
    return counts


def test_config_full_kind_always_sends_the_layout_with_sibling_sections() -> None:
    # the sweep sends the full layout wherever it fits; the plain kind mixes in the smaller layouts
    full = _asked_key_lines("config-full:yaml+toml", 60)
    mixed = _asked_key_lines("config:yaml+toml", 60)
    assert min(full) >= 2  # the asked key also under sibling sections or the echo block's name
    assert mixed.count(1) >= 5  # minimal layout (a third of them): the asked key on its own line only


def test_ruler_niah_kind_answers_every_asked_value_as_the_suite_grades_it() -> None:
    """Each document is one of RULER's needle tasks as the suite renders it; the training answer (the
    asked values, comma-separated) gets the full string_match_all score the suite's metric gives, and
    every task of the family turns up."""
    from recall_eval.metrics import string_match_all
    from suites.ruler_niah import NIAH_TASKS

    examples = list(iter_training_examples(5, 64, 100, 300, ("ruler-niah",)))
    instructions = set()
    for example in examples:
        content = example.messages[-1]["content"]
        values = example.answer.split(", ")
        assert all(value in content for value in values)
        assert string_match_all(example.answer, values) == 1.0
        instructions.add(content.split("\n", 1)[0])
    assert len(instructions) >= 2  # singular and plural wordings: single and multi-value tasks
    assert len(NIAH_TASKS) == 8


def test_ruler_niah_documents_are_sized_in_tokens_whatever_the_haystack() -> None:
    """Distractor-needle haystacks cost ~10 tokens per filler word with uuids: the kind scales the filler
    so that a document of any task stays within a few times the prose document's length."""
    lengths = [
        len("\n".join(m["content"] for m in e.messages))
        for e in iter_training_examples(9, 48, 800, 800, ("ruler-niah",))
    ]
    assert max(lengths) < 4 * min(lengths)


def test_mrcr_kind_answers_with_the_prefix_and_the_asked_answer() -> None:
    """An MRCR-style chat: the answer is the required prefix and one of the assistant turns, which the
    mrcr metric grades 1.0; 2, 4 and 8 same-kind requests all occur."""
    from recall_eval.metrics import mrcr_score

    counts = set()
    for example in iter_training_examples(3, 30, 200, 400, ("mrcr",)):
        question = example.messages[-1]["content"]
        prefix = question.split("Prepend ", 1)[1].split(" ", 1)[0]
        turns = [m["content"] for m in example.messages if m["role"] == "assistant"]
        assert example.answer.startswith(prefix) and example.answer[len(prefix) :] in turns
        assert mrcr_score(example.answer, example.answer, prefix) == 1.0
        form_topic = question.split("(1 indexed) ", 1)[1].split(". Do not", 1)[0]
        counts.add(sum(m["content"] == f"Write a {form_topic}." for m in example.messages))
    assert counts == {2, 4, 8}


def test_multiturn_kth_kind_asks_only_which_mention() -> None:
    examples = list(iter_training_examples(4, 12, 100, 200, ("multiturn-kth",)))
    assert all(re.search(r"the \w+ time I mentioned it\?", e.messages[-1]["content"]) for e in examples)
