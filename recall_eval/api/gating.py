"""The CI gates: --fail-under of a sweep or resume, and of a compare on every variant, and a compare's
--fail-on-regression against the first variant.

The regression tests are the compare report's own, per suite as the report's tables show them, at the
one alpha (recall_eval.stats.SIGNIFICANCE) after the Holm correction over every test of the compare: the exact McNemar test on paired cases of pass/miss suites
(recall_eval.stats.paired_test), so the gate fails exactly where the report says "loses recall", and
for scored suites the Wilcoxon signed-rank test on the per-case score differences
(recall_eval.stats.scored_paired_test), failing where the report says "scores lower".
The wording and exit codes live in recall_eval.exit_codes.
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from recall_eval.api.records import RunRecord
from recall_eval.exit_codes import (
    RecallGate,
    Regression,
    ScoreRegression,
    Verdict,
    compare_verdict,
    parse_fail_under,
)
from recall_eval.frame import without_baselines
from recall_eval.stats import (
    SIGNIFICANCE,
    ScoredPairedTest,
    holm_adjust,
    paired_test,
    recall_table,
    scored_paired_test,
)

OVERALL = "overall"


def recall_gate(fail_under: str | RecallGate | None, suites: Sequence[str]) -> RecallGate | None:
    """--fail-under of a sweep, resume or compare, checked against its suites (BadInput before anything
    starts)."""
    if fail_under is None or isinstance(fail_under, RecallGate):
        return fail_under
    return parse_fail_under(fail_under, suites)


def _recall(frame: pd.DataFrame) -> float:
    return float(recall_table(frame)["recall"].iloc[0])


def _scopes(frame: pd.DataFrame, planned: Sequence[str]) -> tuple[list[str], list[str]]:
    """(pass/miss suites, scored suites) of a results frame, in the planned order, then any others (a
    file suite's rows name their own tasks); a suite is scored when a metric grades its cases. A no-context
    baseline is in neither: it is never part of a gate."""
    frame = without_baselines(frame)
    found = list(dict.fromkeys(frame["suite"]))
    ordered = list(dict.fromkeys([*(s for s in planned if s in found), *found]))
    scored = set(frame.loc[frame["metric"].notna(), "suite"])
    return [s for s in ordered if s not in scored], [s for s in ordered if s in scored]


def _scope(frame: pd.DataFrame, suites: Sequence[str]) -> pd.DataFrame:
    return frame[frame["suite"].isin(list(suites))]


def scored_comparisons(
    labels: Sequence[str], runs: Sequence[RunRecord]
) -> list[tuple[str, str, ScoredPairedTest]]:
    """(variant, scope, test) for each later variant against the first on the scored suites: each scored
    suite, then "overall" (every scored case) when there are several; what the compare report's scored
    table shows, for the console and the regression gate."""
    baseline = runs[0].frame
    _, scored = _scopes(baseline, runs[0].run.spec.suites)
    scopes = [(suite, [suite]) for suite in scored] + ([(OVERALL, scored)] if len(scored) > 1 else [])
    return [
        (label, scope, scored_paired_test(_scope(baseline, suites), _scope(run.frame, suites)))
        for label, run in zip(labels[1:], runs[1:], strict=True)
        for scope, suites in scopes
    ]


def regressions(labels: Sequence[str], runs: Sequence[RunRecord]) -> list[Regression | ScoreRegression]:
    """Each later variant against the first: per suite (and overall, when there are several suites of a
    kind), where the paired test says it loses: for pass/miss suites exact McNemar (more pass->miss
    flips), for scored suites the Wilcoxon signed-rank test on the score differences (mean difference
    below 0). Every test of the compare (each variant, each scope, both kinds) is one family: a loss counts
    when its Holm-adjusted p is below the alpha, so a compare of many suites and variants that are all as
    good as the baseline still fails --fail-on-regression with chance at most alpha."""
    baseline = runs[0].frame
    plain, _ = _scopes(baseline, runs[0].run.spec.suites)
    scopes = [(suite, [suite]) for suite in plain] + ([(OVERALL, plain)] if len(plain) > 1 else [])
    plain_tests = [
        (label, scope, _scope(baseline, suites), _scope(run.frame, suites))
        for label, run in zip(labels[1:], runs[1:], strict=True)
        for scope, suites in scopes
    ]
    paired = [paired_test(a, b) for _, _, a, b in plain_tests]
    scored = scored_comparisons(labels, runs)
    adjusted = holm_adjust([test.p_value for test in paired] + [test.p_value for _, _, test in scored])
    found: list[Regression | ScoreRegression] = []
    for (label, scope, a, b), test, p_holm in zip(plain_tests, paired, adjusted, strict=False):
        if p_holm < SIGNIFICANCE and test.lost > test.gained:
            found.append(
                Regression(
                    variant=label,
                    baseline=labels[0],
                    suite=scope,
                    recall_baseline=_recall(a),
                    recall_variant=_recall(b),
                    lost=test.lost,
                    gained=test.gained,
                    p_value=test.p_value,
                    alpha=SIGNIFICANCE,
                    p_adjusted=p_holm,
                    family=len(adjusted),
                )
            )
    for (label, scope, test), p_holm in zip(scored, adjusted[len(paired) :], strict=True):
        if p_holm < SIGNIFICANCE and test.mean_diff is not None and test.mean_diff < 0:
            found.append(
                ScoreRegression(
                    variant=label,
                    baseline=labels[0],
                    suite=scope,
                    test=test,
                    alpha=SIGNIFICANCE,
                    p_adjusted=p_holm,
                    family=len(adjusted),
                )
            )
    return found


def gate_compare(
    labels: Sequence[str],
    runs: Sequence[RunRecord],
    gate: RecallGate | None = None,
    fail_on_regression: bool = False,
) -> Verdict:
    """The exit code of a finished compare and the lines that explain a non-zero one."""
    variants = [(label, run.results) for label, run in zip(labels, runs, strict=True)]
    scoring = runs[0].run.scoring if runs else "lenient"
    return compare_verdict(variants, gate, regressions(labels, runs) if fail_on_regression else [], scoring)
