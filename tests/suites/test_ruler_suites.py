"""RULER's tasks and the MRCR-style suite as generated here: each task's structure pinned (counts, value
kinds, where the needles sit), determinism, growth with filler, and the --suite names."""

from __future__ import annotations

import re
from collections import Counter

import pytest

import suites
from recall_eval import api
from recall_eval.api.sweeping import build_spec
from recall_eval.errors import BadInput
from suites import ruler
from suites.mrcr import FORMS, PREFIX_CHARS

NUMBER = re.compile(r"^\d{7}$")
UUID4 = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$")
WORD_KEY = re.compile(r"^[a-z]+-[a-z]+$")
NEEDLE = re.compile(r"One of the special magic (\w+) for (\S+) is: (\S+)\.")


def _case(name: str, depth: float = 50.0, words: int = 3000, seed: int = 0):
    (recipe,) = suites.build_recipes(name, (4096,), (depth,), 1, seed)
    return recipe.render(words)


@pytest.mark.parametrize(
    ("task", "key", "value", "needles", "answers", "haystack"),
    [
        ("niah_single_1", WORD_KEY, NUMBER, 1, 1, "noise"),
        ("niah_single_2~filler", WORD_KEY, NUMBER, 1, 1, "filler"),
        ("niah_single_3~filler", WORD_KEY, UUID4, 1, 1, "filler"),
        ("niah_multikey_1~filler", WORD_KEY, NUMBER, 4, 1, "filler"),
        ("niah_multikey_2", WORD_KEY, NUMBER, 1, 1, "needle"),
        ("niah_multikey_3", UUID4, UUID4, 1, 1, "needle"),
        ("niah_multivalue~filler", WORD_KEY, NUMBER, 4, 4, "filler"),
        ("niah_multiquery~filler", WORD_KEY, NUMBER, 4, 4, "filler"),
    ],
)
def test_niah_structure(task, key, value, needles, answers, haystack):
    case = _case(task)
    text = case.messages[0].content
    found = NEEDLE.findall(text)
    assert case.params["haystack"] == haystack and case.metric == "string_match_all"
    assert case.params["num_needles"] == needles and len(case.expected) == answers
    assert all(value.match(v) for v in case.expected)
    queried = {k for kind, k, v in found if v in case.expected}
    assert all(key.match(k) for k in queried)
    # every answer is in the prompt exactly once; in a needle haystack the others are distractors
    assert all(text.count(v) == 1 for v in case.expected)
    if haystack == "needle":
        assert len(found) > 50 and len({k for _, k, _ in found}) > 50
    else:
        assert len(found) == needles
    # the question names the keys asked for, and ends in the answer prefix the model continues
    assert all(k in text.split("\n")[-1] for k in queried)
    assert text.rstrip().endswith(("are", "is"))
    # the first answer sits at the cell's depth of the haystack
    units = case.params["haystack_units"]
    assert case.params["needle_units"][0] == round(0.5 * units)
    span = case.needle
    assert text[span.char_start : span.char_end] == case.expected[0]
    assert 0.35 < span.char_start / len(text) < 0.65


def test_niah_depth_moves_the_needle_and_nothing_else_changes_the_answer():
    early, late = _case("niah_single_1", 0.0), _case("niah_single_1", 100.0)
    assert early.needle.char_start < 300 < late.needle.char_start
    assert late.needle.char_start / len(late.messages[0].content) > 0.9


def test_vt_is_one_chain_of_four_hops_after_a_one_shot_example():
    case = _case("vt", 0.0)
    text = case.messages[0].content
    names = case.expected
    assert len(names) == 5 and all(re.fullmatch(r"[A-Z]{5}", n) for n in names)
    value = re.search(rf"VAR {names[0]} = (\d{{5}})", text).group(1)
    for a, b in zip(names, names[1:], strict=False):
        assert f"VAR {b} = VAR {a}" in text
    assert text.count("Question: Find all variables") == 2  # the example and the question
    assert text.rstrip().endswith(f"assigned the value {value}, they are:")
    assert case.depth_percent == 0.0


def test_cwe_counts_and_answer():
    case = _case("cwe", 0.0)
    text = case.messages[0].content
    listing = text.split("\n")[-2]  # the question's numbered list
    words = re.findall(r"\d+\. (\w+)", listing)
    counts = Counter(words)
    assert len(case.expected) == 10
    assert all(counts[w] == 30 for w in case.expected)  # freq_cw 30 at 4096 tokens and above
    assert {c for w, c in counts.items() if w not in case.expected} == {3}  # freq_ucw 3
    assert case.params["distinct_words"] == len(counts)


def test_fwe_answer_is_the_three_most_frequent_coded_words_after_the_noise():
    case = _case("fwe", 0.0)
    context = case.messages[0].content.split("coded words. ")[1].split("\nQuestion")[0]
    counts = Counter(context.split())
    ranked = [w for w, _ in counts.most_common(4)]
    assert ranked[0] == "...." and ranked[1:] == list(case.expected)
    # Zipf counts, alpha 2: ranks 2 and 3 hold n/(4 zeta) and n/(9 zeta) words
    assert counts[ranked[1]] == pytest.approx(9 / 4 * counts[ranked[2]], rel=0.02)


@pytest.mark.parametrize("needles", [2, 4, 8])
def test_mrcr_structure(needles):
    case = _case(f"mrcr_{needles}", 50.0, words=2000)
    prefix, ordinal = case.params["prefix"], case.params["ordinal"]
    ask = case.messages[-1].content
    form = next(f for f in FORMS if f" {f} about " in ask)
    topic = ask.split(f" {form} about ")[1].split(".")[0]
    request = f"Write a {form} about {topic}."
    asked = [i for i, m in enumerate(case.messages) if m.role == "user" and m.content == request]
    assert len(asked) == needles and case.metric == "mrcr"
    assert len(prefix) == PREFIX_CHARS and prefix in ask
    answer_turn = case.messages[asked[ordinal - 1] + 1]
    assert case.expected == (prefix + answer_turn.content,)
    assert case.needle.message_index == asked[ordinal - 1] + 1
    assert 0.0 < case.params["floor"] < 1.0
    assert [m.role for m in case.messages[:-1]] == ["user", "assistant"] * ((len(case.messages) - 1) // 2)


@pytest.mark.parametrize("name", [*ruler.TASKS, "mrcr_2", "mrcr_8"])
def test_deterministic_monotone_and_seeded(name):
    (recipe,) = suites.build_recipes(name, (4096,), (50.0,), 1, 0)
    (again,) = suites.build_recipes(name, (4096,), (50.0,), 1, 0)
    (other,) = suites.build_recipes(name, (4096,), (50.0,), 1, 1)
    assert recipe.render(1500) == again.render(1500) and recipe.id == again.id
    assert recipe.render(1500).messages != other.render(1500).messages and recipe.id != other.id
    sizes = [sum(len(m.content) for m in recipe.render(w).messages) for w in range(0, 4000, 150)]
    assert sizes == sorted(sizes) and sizes[-1] > sizes[0]


def test_suite_names_expand_and_refuse_with_one_line():
    assert suites.parse_suite_names("ruler") == ruler.TASKS
    assert suites.parse_suite_names("needle,mrcr") == ("needle", "mrcr_2", "mrcr_4", "mrcr_8")
    with pytest.raises(BadInput, match="use niah_single_2~filler"):
        suites.parse_suite_names("niah_single_2")
    with pytest.raises(BadInput, match="repeated"):
        suites.parse_suite_names("ruler,vt")
    with pytest.raises(BadInput, match="no such file"):
        suites.parse_suite_names("ruler-jsonl:/nonexistent/x.jsonl")


@pytest.mark.parametrize("name", ["needle", *ruler.TASKS, "mrcr_4"])
def test_no_context_baseline_keeps_the_question_and_drops_every_answer(name):
    (recipe,) = suites.build_recipes(f"{name}~nocontext", (4096,), (50.0,), 1, 0)
    (full,) = suites.build_recipes(name, (4096,), (50.0,), 1, 0)
    case, asked = recipe.render(0), full.render(3000)
    text = "\n".join(m.content for m in case.messages)
    assert case.suite == f"{name}~nocontext" and case.id != asked.id and case.expected == asked.expected
    assert case.metric == asked.metric and case.params["baseline_of"] == name and case.needle is None
    if name == "mrcr_4":  # the prefix is in the question; the answer after it is not
        assert case.expected[0].removeprefix(case.params["prefix"]) not in text
    else:
        assert not any(value in text for value in case.expected)
    assert asked.messages[-1].content.splitlines()[-1].endswith(text.splitlines()[-1])  # the same question
    assert len(text) < 3000


def test_no_context_names():
    assert suites.parse_suite_names("ruler~nocontext")[:2] == (
        "niah_single_1~nocontext",
        "niah_single_2~filler~nocontext",
    )
    assert suites.parse_suite_names("needle,needle~nocontext") == ("needle", "needle~nocontext")
    with pytest.raises(BadInput, match="config has no no-context form"):
        suites.parse_suite_names("config~nocontext")


@pytest.mark.parametrize(
    "task", ["niah_multikey_1~filler", "niah_multivalue~filler", "niah_multiquery~filler"]
)
def test_every_needle_sits_where_its_fraction_says(task):
    (recipe,) = suites.build_recipes(task, (4096,), (25.0,), 1, 3)
    case = recipe.render(3000)
    text = case.messages[0].content
    units = case.params["haystack_units"]
    assert len(case.params["needle_units"]) == len(recipe.needles) == 4
    for sentence, unit in zip(recipe.needles, case.params["needle_units"], strict=True):
        assert text.count(sentence) == 1
        # a needle goes in at a sentence boundary near its word position: within a couple of sentences
        assert abs(text.index(sentence) / len(text) - unit / units) < 0.03
    assert case.params["needle_units"][0] == round(0.25 * units)


def test_each_case_carries_its_tasks_answer_budget():
    # RULER's tokens_to_generate per task (scripts/data/synthetic/constants.py), MRCR-style 64
    expected = {"niah_single_1": 128, "niah_multivalue~filler": 128, "vt": 30, "cwe": 120, "fwe": 50}
    expected |= {"mrcr_2": 64, "vt~nocontext": 30}
    for suite, tokens in expected.items():
        (case,) = [r.render(0) for r in suites.build_recipes(suite, (4096,), (50.0,), 1, 0)]
        assert case.max_tokens == tokens, suite
    assert suites.build_recipes("needle", (4096,), (50.0,), 1, 0)[0].render(0).max_tokens is None


def test_without_max_tokens_the_cases_budgets_rule():
    def spec(suite: str, **grid):
        return build_spec(
            api.GridOptions(suites=suite, lengths="4096", depths="50", **grid), api.RequestOptions()
        )

    default = spec("needle").max_tokens
    assert spec("ruler").case_budgets and spec("ruler").max_tokens == default  # the rest keep the default
    assert spec("needle,mrcr").case_budgets
    assert not spec("needle").case_budgets  # nothing carries a budget: the spec is what it was
    given = spec("ruler", max_tokens=16)
    assert not given.case_budgets and given.max_tokens == 16  # --max-tokens rules for every case
