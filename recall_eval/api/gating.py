"""The CI gates: --fail-under of a sweep or resume, and of a compare on every variant, and a compare's
--fail-on-regression against the first variant.

The regression test is the compare report's own: the exact McNemar test on paired cases
(recall_eval.stats.paired_test, per suite as the report's table shows it) at the one alpha
(recall_eval.stats.SIGNIFICANCE), so the gate fails exactly where the report says "loses recall".
The wording and exit codes live in recall_eval.exit_codes.
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from recall_eval.api.records import RunRecord
from recall_eval.exit_codes import RecallGate, Regression, Verdict, compare_verdict, parse_fail_under
from recall_eval.stats import SIGNIFICANCE, paired_test, recall_table

OVERALL = "overall"


def recall_gate(fail_under: str | RecallGate | None, suites: Sequence[str]) -> RecallGate | None:
    """--fail-under of a sweep, resume or compare, checked against its suites (BadInput before anything
    starts)."""
    if fail_under is None or isinstance(fail_under, RecallGate):
        return fail_under
    return parse_fail_under(fail_under, suites)


def _recall(frame: pd.DataFrame) -> float:
    return float(recall_table(frame)["recall"].iloc[0])


def regressions(labels: Sequence[str], runs: Sequence[RunRecord]) -> list[Regression]:
    """Each later variant against the first: per suite (and overall, when there are several suites),
    where the paired test says it loses recall (p below the report's alpha, more pass->miss flips)."""
    baseline = runs[0].frame
    suites = list(runs[0].run.spec.suites)
    scopes = [*suites, OVERALL] if len(suites) > 1 else suites
    found = []
    for label, run in zip(labels[1:], runs[1:], strict=True):
        frame = run.frame
        for scope in scopes:
            a = baseline if scope == OVERALL else baseline[baseline["suite"] == scope]
            b = frame if scope == OVERALL else frame[frame["suite"] == scope]
            test = paired_test(a, b)
            if test.p_value < SIGNIFICANCE and test.lost > test.gained:
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
