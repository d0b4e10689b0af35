"""Cases calibrated without their prompts (Calibrator keep_prompts=False, as a sweep calibrates) render
again, when sent, byte for byte the prompt calibration measured: with tiktoken on real recipes, on every
path a case can end calibration by (sized, a smaller form, not applicable, refused as too long)."""

from __future__ import annotations

import suites
from recall_eval.calibration import Calibrator
from recall_eval.tokenization import TiktokenTokenizer
from tests.recall_eval.test_calibration import _ContextLimited


async def _both(tokenizer_factory, recipes):
    kept = await Calibrator(tokenizer_factory()).calibrate(recipes)
    light = await Calibrator(tokenizer_factory(), keep_prompts=False).calibrate(recipes)
    return kept, light


def _check(kept, light):
    assert len(kept) == len(light)
    for whole, without in zip(kept, light, strict=True):
        assert whole.messages and without.messages == ()  # nothing of the prompt kept after calibration
        again = without.with_prompt()
        assert again.messages == whole.messages  # the same bytes as measured
        assert again.model_dump() == whole.model_dump()  # and every calibrated field
        assert without.with_prompt() is not again  # rendered anew each time: nothing cached on the case


async def test_sized_cases_render_again_identically():
    recipes = suites.build_recipes("needle", (338, 1350, 5391), (0.0, 50.0, 100.0), 1, 0)
    _check(*await _both(TiktokenTokenizer, recipes))


async def test_smaller_forms_and_not_applicable_render_again_identically():
    recipes = [
        r for s in ("config", "multiturn") for r in suites.build_recipes(s, (100, 338), (0.0, 100.0), 2, 5)
    ]
    recipes += suites.build_recipes("needle", (20,), (50.0,), 1, 0)  # shorter than its prompt with no filler
    kept, light = await _both(TiktokenTokenizer, recipes)
    assert any(case.not_applicable for case in kept)  # the path is taken
    assert len({case.params.get("layout") for case in kept}) > 1  # smaller forms too
    _check(kept, light)


async def test_refused_cases_render_again_identically():
    recipes = suites.build_recipes("needle", (1350, 5391), (50.0,), 1, 0)
    kept, light = await _both(lambda: _ContextLimited(limit=1400), recipes)
    assert kept[1].too_long is not None
    _check(kept, light)


def test_a_whole_case_is_its_own_prompt():
    (recipe,) = suites.build_recipes("needle", (338,), (50.0,), 1, 0)
    case = recipe.render(40)
    assert case.with_prompt() is case
