"""The suite registry: every suite registered with what its cases do; forms, families and plugins."""

from __future__ import annotations

import json

import pytest

from recall_eval.errors import BadInput, UserError
from recall_eval.types import CaseRecipe
from suites import REGISTRY, build_recipes, no_context, parse_suite_names
from suites.registry import Registry, Suite
from tests.suites.plugin import install_plugin


def test_every_registered_suite_builds_renderable_recipes() -> None:
    for name in REGISTRY.suites():
        recipes = build_recipes(name, [1000, 2000], [0, 50, 100], 2, 0)
        assert len(recipes) == 12
        for recipe in recipes:
            assert isinstance(recipe, CaseRecipe) and recipe.suite == name
            case = recipe.render(recipe.words_guess(1.3))
            assert case.suite == name and case.expected
            assert case.target_tokens == recipe.target_tokens and case.depth_percent == recipe.depth_percent


def test_unknown_suite_names_the_known_ones() -> None:
    with pytest.raises(BadInput, match="unknown suite 'haystack'; known suites: .*needle"):
        build_recipes("haystack", [1000], [50], 1, 0)


@pytest.mark.parametrize("name", list(REGISTRY.suites()))
def test_a_registration_says_what_its_cases_do(name: str) -> None:
    """Each suite's declared budget, scorer and no-context form are what its rendered cases carry, so
    the parser and the budget choice can trust the declaration without rendering."""
    suite = REGISTRY.get(name)
    for recipe in build_recipes(name, [1000, 3000], [0, 100], 1, 0):
        case = recipe.render(recipe.words_guess(1.3))
        assert case.max_tokens == suite.budget
        assert (case.metric or "recall") == suite.scorer
        assert no_context.has_baseline(recipe) == suite.no_context
    assert suite.section == ("recall" if suite.scorer == "recall" else "tasks")


def test_forms_and_families_are_registered_not_special_cased(tmp_path) -> None:
    """A file suite and a no-context baseline parse through their registered forms, in order: a file
    path ending in ~nocontext stays a file; a family expands in registration order."""
    file = tmp_path / "rows~nocontext.jsonl"
    file.write_text(json.dumps({"prompt": "q", "expected": "a"}) + "\n")
    assert [form.pattern for form in REGISTRY._forms] == ["ruler-jsonl:PATH", "jsonl:PATH", "SUITE~nocontext"]
    assert parse_suite_names(f"jsonl:{file}") == (f"jsonl:{file}",)
    assert parse_suite_names("mrcr~nocontext") == ("mrcr_2~nocontext", "mrcr_4~nocontext", "mrcr_8~nocontext")
    with pytest.raises(
        BadInput, match=r"config has no no-context form \(suites with one: needle, ruler, mrcr\)"
    ):
        parse_suite_names("config~nocontext")
    with pytest.raises(BadInput, match="use niah_single_2~filler"):
        parse_suite_names("niah_single_2")


def test_a_name_is_registered_once() -> None:
    registry = Registry(group="recall_eval.no_such_group")
    registry.add(Suite("a", lambda *grid: [], version=1, family="fam"))
    with pytest.raises(ValueError, match="registered twice"):
        registry.add(Suite("a", lambda *grid: [], version=2))
    with pytest.raises(ValueError, match="registered twice"):
        registry.add(Suite("fam", lambda *grid: [], version=1))  # a family's name is taken too
    with pytest.raises(ValueError, match="is a suite's name"):
        registry.add(Suite("b", lambda *grid: [], version=1, family="a"))


def test_installed_packages_register_suites_through_entry_points(tmp_path, monkeypatch) -> None:
    """A package on sys.path with a `recall_eval.suites` entry point adds its suites and family; they
    parse, build and carry their own version in the reuse key's terms."""
    monkeypatch.syspath_prepend(str(install_plugin(tmp_path / "site")))
    registry = Registry()
    registry.add(Suite("needle", lambda *grid: [], version=1))
    assert registry.parse("colors_family") == ("colors", "colors_scored")
    assert registry.version("colors") == 3 and registry.get("colors_scored").section == "tasks"
    (recipe,) = registry.recipes("colors", [500], [50.0], 1, 0)
    assert recipe.render(10).expected == ("violet",)


def test_a_broken_plugin_is_named_in_one_line(tmp_path, monkeypatch) -> None:
    monkeypatch.syspath_prepend(str(install_plugin(tmp_path / "site", "tiny_recall_suite:broken", "bad")))
    with pytest.raises(UserError, match=r"suite plugin 'bad' \(tiny_recall_suite:broken\) failed to register: "
                       r"RuntimeError: this plugin cannot register"):  # fmt: skip
        Registry().parse("needle")
