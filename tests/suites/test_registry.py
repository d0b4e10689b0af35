from __future__ import annotations

import pytest

from recall_eval.errors import BadInput
from recall_eval.types import CaseRecipe
from suites import SUITES, build_recipes


def test_every_registered_suite_builds_renderable_recipes() -> None:
    for name in SUITES:
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
