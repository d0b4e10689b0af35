"""A candidate run tested against a stored baseline (recall_eval.baseline_store), paired on case ids.

Which baseline may gate a run (`mismatch`): the same cases (suites, grid, seed, answer budget, request
knobs, and the prompts the reuse key digests) under the same headline scoring; anything else is named.

The test (`baseline_tests`) is the compare report's, per suite and pooled: the exact McNemar test on the
paired cases of a pass/miss suite, the Wilcoxon signed-rank test on the score differences of a scored
suite (recall_eval.stats). The suites and the pooled test are one family: their p-values are
Holm-adjusted together, so the chance that a candidate as good as the baseline fails anywhere stays
below alpha. A scope fails when its adjusted p is below alpha, it leans down (more pass->miss than
miss->pass, or a negative mean score difference), and, with a tolerance, when the whole interval of
the drop (Newcombe's paired interval; a t interval for scores) lies above the tolerance.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import pandas as pd

from recall_eval.baseline_store import Baseline
from recall_eval.reuse import PROMPTS_KEY
from recall_eval.stats import (
    SIGNIFICANCE,
    PairedTest,
    ScoredPairedTest,
    holm_adjust,
    paired_drop_interval,
    paired_test,
    paired_tests_by,
)
from recall_eval.types import RunSpec, request_knobs

POOLED = "pooled"
# RunSpec fields that decide which cases run and what a model is asked: a baseline must share them
CASE_FIELDS = {
    "suites": "--suite",
    "lengths": "--lengths",
    "depths": "--depths",
    "trials": "--trials",
    "seed": "--seed",
    "max_tokens": "--max-tokens",
    "case_budgets": "--max-tokens (per-case budgets)",
    # the request settings that change verdicts, by their flags (recall_eval.types.RequestSettings)
    **{name: knob.flag for name, knob in request_knobs().items() if knob.verdicts},
}


def _shown(value: Any) -> str:
    if isinstance(value, list | tuple):
        return ",".join(f"{item:g}" if isinstance(item, float) else str(item) for item in value)
    return "not set" if value is None else str(value)


def mismatch(baseline: Baseline, spec: RunSpec, scoring: str, key: Mapping[str, str]) -> list[str]:
    """What differs between the baseline and a candidate run of `spec` (empty: it may gate it): one
    phrase per difference, e.g. "--lengths 338,700 here, 338,1000 in the baseline". `key`: the
    candidate's reuse key (recall_eval.reuse); the package version may differ, the prompts may not."""
    mine = spec.model_dump(mode="json")
    theirs = baseline.spec
    found = []
    for name, flag in CASE_FIELDS.items():
        if name in theirs and _shown(mine.get(name)) != _shown(theirs.get(name)):
            found.append(f"{flag} {_shown(mine.get(name))} here, {_shown(theirs.get(name))} in the baseline")
    if scoring != baseline.scoring:
        found.append(f"--scoring {scoring} here, {baseline.scoring} in the baseline")
    for name, value in key.items():
        stored = baseline.versions.get(name)
        if name.startswith("suite:") and stored != value:
            found.append(f"{name} version {value} here, {stored or 'unknown'} in the baseline")
        elif name == PROMPTS_KEY and stored != value and not found:
            found.append("the rendered prompts differ from the baseline's (the suites' text changed)")
    return found


@dataclass(frozen=True)
class ScopeTest:
    """One suite (or the pooled pass/miss suites) of the candidate against the baseline."""

    scope: str  # a suite, or POOLED
    kind: Literal["recall", "score"]
    paired: int  # cases answered by a live model under both
    baseline: float | None  # recall (or mean score) of the baseline over the paired cases
    candidate: float | None
    lost: int  # pass -> miss (scored: cases scored lower)
    gained: int  # miss -> pass (scored: scored higher)
    p_value: float  # exact McNemar (scored: Wilcoxon signed-rank), two-sided
    p_adjusted: float  # Holm over the family of scopes
    drop: float | None  # baseline - candidate
    drop_low: float | None  # the drop's 95% interval
    drop_high: float | None
    tolerance: float
    alpha: float = SIGNIFICANCE

    @property
    def worse(self) -> bool:
        """Significantly worse than the baseline by more than the tolerance."""
        significant = self.p_adjusted < self.alpha and self.drop is not None and self.drop > 0
        if not significant or (self.kind == "recall" and self.lost <= self.gained):
            return False
        return self.tolerance <= 0 or (self.drop_low is not None and self.drop_low > self.tolerance)

    def line(self, name: str) -> str:
        """The failure line of the gate."""
        what = "recall" if self.kind == "recall" else "mean score"
        test = "exact McNemar" if self.kind == "recall" else "Wilcoxon signed-rank"
        flips = "pass->miss" if self.kind == "recall" else "scored lower"
        back = "miss->pass" if self.kind == "recall" else "scored higher"
        interval = (
            f", drop {self.drop:.3f} [{self.drop_low:.3f}, {self.drop_high:.3f}] above tolerance {self.tolerance:g}"
            if self.tolerance > 0 and self.drop is not None
            else ""
        )
        return (
            f"{self.scope}: {what} {self.baseline:.3f} -> {self.candidate:.3f} against baseline {name} on "
            f"{self.paired} paired cases, {self.lost} {flips} and {self.gained} {back}, {test} p = "
            f"{self.p_value:.2g} (Holm {self.p_adjusted:.2g}) < {self.alpha:.2g}{interval}"
        )


def _recall_scope(scope: str, test: PairedTest) -> dict[str, Any]:
    interval = paired_drop_interval(test)
    n = test.paired
    return {
        "scope": scope,
        "kind": "recall",
        "paired": n,
        "baseline": (test.both_pass + test.lost) / n if n else None,
        "candidate": (test.both_pass + test.gained) / n if n else None,
        "lost": test.lost,
        "gained": test.gained,
        "p_value": test.p_value,
        "drop": interval[0] if interval else None,
        "drop_low": interval[1] if interval else None,
        "drop_high": interval[2] if interval else None,
    }


def _score_scope(scope: str, test: ScoredPairedTest) -> dict[str, Any]:
    flip = lambda value: None if value is None else -value  # noqa: E731 - drop = -(B - A)
    return {
        "scope": scope,
        "kind": "score",
        "paired": test.paired,
        "baseline": test.mean_a,
        "candidate": test.mean_b,
        "lost": test.lower,
        "gained": test.higher,
        "p_value": test.p_value,
        "drop": flip(test.mean_diff),
        "drop_low": flip(test.ci_high),
        "drop_high": flip(test.ci_low),
    }


def baseline_tests(
    baseline_frame: pd.DataFrame,
    frame: pd.DataFrame,
    suites: Sequence[str],
    tolerance: float = 0.0,
    alpha: float = SIGNIFICANCE,
) -> list[ScopeTest]:
    """Each suite (in `suites` order, then any other found), then the pooled pass/miss suites when
    there are several, with Holm-adjusted p-values over them all (see the module docstring)."""
    found = list(dict.fromkeys([*(s for s in suites if s in set(frame["suite"])), *frame["suite"]]))
    raw = [
        _score_scope(suite, test) if isinstance(test, ScoredPairedTest) else _recall_scope(suite, test)
        for suite, test in paired_tests_by(baseline_frame, frame, "suite", found).items()
    ]
    plain = [item["scope"] for item in raw if item["kind"] == "recall"]
    if len(plain) > 1:
        pooled = paired_test(
            baseline_frame[baseline_frame["suite"].isin(plain)], frame[frame["suite"].isin(plain)]
        )
        raw.append(_recall_scope(POOLED, pooled))
    adjusted = holm_adjust([item["p_value"] for item in raw])
    return [
        ScopeTest(**item, p_adjusted=p, tolerance=tolerance, alpha=alpha)
        for item, p in zip(raw, adjusted, strict=True)
    ]


def unpaired(baseline_frame: pd.DataFrame, frame: pd.DataFrame) -> tuple[int, int]:
    """(cases of the run missing from the baseline, cases of the baseline the run did not store)."""
    mine, theirs = set(frame["case_id"]), set(baseline_frame["case_id"])
    return len(mine - theirs), len(theirs - mine)
