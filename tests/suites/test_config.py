from __future__ import annotations

import re
from itertools import pairwise

import pytest
import tiktoken

from recall_eval.types import CaseRecipe
from suites import config_vocab
from suites.config_formats import FORMATS, env_name, k8s_name
from suites.config_recall import LAYOUTS, ConfigParams, ConfigRecipe, config_recipes
from tests.suites import config_parsers as parsers

MANY = ConfigParams(lengths=(500, 2000, 8000), depths=(0, 10, 25, 50, 75, 90, 100), trials=15, seed=11)


def _doc(content: str) -> str:
    match = re.fullmatch(r"```\w+\n(.*)\n```\n\n[^\n]+", content, flags=re.S)
    assert match, content[-300:]
    return match.group(1)


def _lookup(recipe: ConfigRecipe, doc: str) -> str:
    fact, fmt = recipe.fact, recipe.fact.fmt
    if fmt == "env":
        return parsers.parse_flat(doc, "=")[env_name(fact.top, fact.sub, fact.key)]
    if fmt == "sysctl":
        return parsers.parse_flat(doc, " = ")[f"{fact.top}.{fact.sub}.{fact.key}"]
    if fmt == "k8s":
        return parsers.parse_k8s(doc)[(k8s_name(fact.top), fact.sub, fact.key)]
    parse = {
        "yaml": parsers.parse_yaml,
        "json": parsers.parse_json,
        "toml": parsers.parse_toml,
        "ini": parsers.parse_ini,
        "nginx": parsers.parse_nginx,
    }[fmt]
    return parse(doc)[(fact.top, fact.sub, fact.key)]


@pytest.fixture(scope="module")
def recipes() -> list[ConfigRecipe]:
    return config_recipes(MANY)


def test_protocol_grid_and_all_formats(recipes: list[ConfigRecipe]) -> None:
    assert len(recipes) == 3 * 7 * 15 and all(isinstance(r, CaseRecipe) for r in recipes)
    assert {r.fact.fmt for r in recipes} == set(FORMATS)
    assert {config_vocab.KEY_TYPE[r.fact.key] for r in recipes} == set(config_vocab.ASKABLE_FAMILIES)


def test_deterministic_and_ids_stable(recipes: list[ConfigRecipe]) -> None:
    again = config_recipes(MANY)
    assert [r.render(40) for r in recipes[:30]] == [r.render(40) for r in again[:30]]
    ids = [r.id for r in recipes]
    assert len(set(ids)) == len(ids)
    assert all(r.render(0).id == r.render(300).id == r.id for r in recipes[:20])
    other = config_recipes(ConfigParams(lengths=(500,), depths=(0,), trials=1, seed=12))[0]
    assert other.id != recipes[0].id and other.fact != recipes[0].fact


def _in_layout(recipe: ConfigRecipe, layout: str) -> ConfigRecipe:
    while recipe.layout != layout:
        smaller = recipe.smaller()
        assert smaller is not None and smaller.id == recipe.id
        recipe = smaller
    return recipe


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("filler_entries", [0, 3, 150])
def test_one_correct_value_at_one_path_in_a_valid_document(
    recipes: list[ConfigRecipe], filler_entries: int, layout: str
) -> None:
    for full in recipes:  # 315 cases over all formats and value types
        recipe = _in_layout(full, layout)
        case = recipe.render(filler_entries)
        assert case.params["layout"] == layout and case.id == full.id
        assert case.messages[-1].content.endswith(full.render(0).messages[-1].content.rsplit("\n", 1)[1])
        content = case.messages[0].content
        value = case.expected[0]
        assert content.count(value) == 1, (recipe.fact.fmt, value)
        assert content[case.needle.char_start : case.needle.char_end] == value
        assert _lookup(recipe, _doc(content)) == value  # parses, path unique, value right
        assert case.params["path"] in content.rsplit("\n", 1)[1]
        assert len(case.distractors) >= {"full": 4, "compact": 2, "minimal": 1}[layout]
        for distractor in case.distractors:
            assert distractor not in value and value not in distractor
            assert distractor in content
        assert len(set(case.distractors)) == len(case.distractors)


def test_distractors_share_the_key_or_differ_by_one_word(recipes: list[ConfigRecipe]) -> None:
    for recipe in recipes[:100]:
        fact = recipe.fact
        same_key_elsewhere = [
            (top, sub)
            for top, sections in (fact.target_block, fact.echo_block)
            for sub, entries in sections
            for key, _ in entries
            if key == fact.key and (top, sub) != (fact.top, fact.sub)
        ]
        assert len(same_key_elsewhere) >= 2  # a sibling section and the echo block
        asked_section = dict(dict(fact.target_block[1])[fact.sub])
        family = config_vocab.ASKABLE_FAMILIES[config_vocab.KEY_TYPE[fact.key]]
        assert len([k for k in asked_section if k in family and k != fact.key]) == 2


def test_entry_sits_at_the_requested_depth(recipes: list[ConfigRecipe]) -> None:
    for recipe in recipes[::3]:
        case = recipe.render(1500)
        share = case.params["entry_index"] / case.params["entries_total"]
        assert abs(share - recipe.depth_percent / 100) <= 0.03, (share, recipe.depth_percent)
        if recipe.depth_percent == 0:
            assert case.params["entry_index"] == 0
        if recipe.depth_percent == 100:
            assert case.params["entry_index"] == case.params["entries_total"] - 1


def test_render_is_monotone(recipes: list[ConfigRecipe], encoder: tiktoken.Encoding) -> None:
    by_format = {r.fact.fmt: r for r in recipes}
    for recipe in by_format.values():
        sizes = [*range(0, 120), 1000, 1001, 1002, 5000, 40000]
        contents = [recipe.render(n).messages[0].content for n in sizes]
        assert all(len(b) > len(a) for a, b in pairwise(contents)), recipe.fact.fmt
        tokens = [len(encoder.encode(c)) for c in contents[:-1]]  # the 40,000-entry document: chars only
        assert all(b >= a for a, b in pairwise(tokens)), recipe.fact.fmt


def test_words_guess_lands_near_the_target(encoder: tiktoken.Encoding) -> None:
    for recipe in config_recipes(ConfigParams(lengths=(2000, 16000), depths=(50,), trials=8, seed=0)):
        guess = recipe.words_guess(1.3)
        tokens = len(encoder.encode(recipe.render(guess).messages[0].content))
        assert 0.6 * recipe.target_tokens < tokens < 1.4 * recipe.target_tokens, (recipe.fact.fmt, tokens)


def test_train_pool_uses_train_services_only() -> None:
    eval_services = set(config_vocab.services("eval"))
    for recipe in config_recipes(
        ConfigParams(lengths=(1000,), depths=(0, 50, 100), trials=5, seed=0, pool="train")
    ):
        content = recipe.render(300).messages[0].content
        names = set(re.findall(r"[a-z]+(?=[_-](?:" + "|".join(config_vocab.ROLES) + r")\b)", content))
        assert names and not names & eval_services
        assert all(name in config_vocab.services("train") for name in names)


def test_smaller_layouts_are_shorter(recipes: list[ConfigRecipe], encoder: tiktoken.Encoding) -> None:
    for full in recipes[::5]:
        sizes = [
            len(encoder.encode(_in_layout(full, layout).render(0).messages[0].content)) for layout in LAYOUTS
        ]
        assert sizes == sorted(sizes, reverse=True) and sizes[0] > sizes[-1], (full.fact.fmt, sizes)
    assert _in_layout(recipes[0], LAYOUTS[-1]).smaller() is None
