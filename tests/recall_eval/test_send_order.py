"""The order a run sends its cases in (recall_eval.api.preparing.build_recipes): suite by suite, trial by
trial, grid order within a trial, so that a server's prefix cache holds one filler stream at a time."""

from __future__ import annotations

from recall_eval.api.preparing import build_recipes
from recall_eval.types import RunSpec
from suites import build_recipes as suite_recipes


def _cells(recipes):
    return [(r.suite, r.trial, r.target_tokens, r.depth_percent) for r in recipes]


def test_cases_are_sent_trial_by_trial_in_grid_order_within_each_trial():
    spec = RunSpec(suites=["needle", "config"], lengths=[600, 1200], depths=[0.0, 100.0], trials=3, seed=4)
    sent = _cells(build_recipes(spec))
    expected = [
        (suite, trial, length, depth)
        for suite in ("needle", "config")
        for trial in range(3)
        for length in (600, 1200)
        for depth in (0.0, 100.0)
    ]
    assert sent == expected
    # the same cases as the suites build (their own order is length, depth, trial)
    built = [r for suite in spec.suites for r in suite_recipes(suite, spec.lengths, spec.depths, 3, 4)]
    assert sorted(sent) == sorted(_cells(built)) and sent != _cells(built)


def test_a_trial_s_cases_share_the_filler_stream_the_order_groups_them_by():
    """What the order relies on: within one trial every needle prompt starts with the same filler
    words, whatever its length; another trial's filler differs from the first word."""
    spec = RunSpec(suites=["needle"], lengths=[400, 900], depths=[100.0], trials=2, seed=0)
    recipes = build_recipes(spec)
    texts = [r.render(r.words_guess(1.3)).messages[0].content for r in recipes]
    (short0, long0, short1, long1) = texts
    assert long0.startswith(short0[:1000]) and long1.startswith(short1[:1000])
    assert short0[:200] != short1[:200]
