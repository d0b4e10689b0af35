"""How a finished run ends for a CI job: the exit code, from the results and an optional recall gate.

    0  finished, and every --fail-under threshold met
    1  could not run or stopped early (server failed to start or kept dying, preflight, I/O)
    2  bad input (options, specs, paths), rejected before any server starts
    3  finished, but no case got an answer from a live model (every outcome an infrastructure one):
       nothing was measured
    4  finished, but a gate failed: recall below --fail-under (overall or for a suite), a variant
       significantly worse than the first on the paired cases (compare --fail-on-regression), a
       candidate significantly worse than its stored baseline (sweep --baseline), or a study cell
       significantly worse than the baseline after the Holm correction (recall_eval.study_stats)
    5  finished, but every answer was cut inside the model's reasoning: the answer budget
       (--max-tokens) is too small for a thinking model, nothing about recall was learned
  130  interrupted (Ctrl-C)

Recall is passes over answers from a live model (recall_eval.stats.recall_table, the one definition);
the gate compares that point estimate with the threshold. A scored suite (RULER tasks, mrcr, files) is
gated on its mean score (stats.score_table) instead; `overall` is the recall of the pass/miss suites,
or the mean score when every suite is scored. A compare is judged variant by variant with
the same rules (compare_verdict); a no-context baseline (`needle~nocontext`) is never part of a gate; its regressions come from the compare report's paired tests
(recall_eval.api.gating: exact McNemar for pass/miss suites, the Wilcoxon signed-rank test on the score
differences for scored ones), here they are only worded and counted.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from recall_eval.errors import BadInput
from recall_eval.formatting import score_change_text
from recall_eval.scoring import budget_eaten_by_reasoning
from recall_eval.types import INFRA_OUTCOMES, NO_CONTEXT_SUFFIX, Result, is_baseline

if TYPE_CHECKING:  # pandas and scipy load when a run is judged, not when the options are declared
    import pandas as pd

    from recall_eval.stats import ScoredPairedTest

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_BAD_INPUT = 2
EXIT_NO_ANSWER = 3
EXIT_CELL_WORSE = 4  # study: a setting lost recall, the same code as every other failed gate
EXIT_BELOW_GATE = 4
EXIT_BUDGET_TOO_SMALL = 5
EXIT_INTERRUPTED = 130


@dataclass(frozen=True)
class RecallGate:
    """--fail-under: an overall threshold and/or one per suite, each in [0, 1]."""

    overall: float | None = None
    per_suite: dict[str, float] = field(default_factory=dict)


def _threshold(text: str, where: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise BadInput(f"--fail-under {where}: {text!r} is not a number (write e.g. 0.95)") from None
    if not 0.0 <= value <= 1.0:
        raise BadInput(f"--fail-under {where}: {value:g} is not a recall between 0 and 1 (write e.g. 0.95)")
    return value


def parse_fail_under(text: str, suites: Sequence[str]) -> RecallGate:
    """'0.95' (overall), 'needle=0.98,config=0.8' (per suite), or both ('0.9,needle=0.98')."""
    overall: float | None = None
    per_suite: dict[str, float] = {}
    items = [item.strip() for item in text.split(",") if item.strip()]
    if not items:
        raise BadInput("--fail-under: empty (write e.g. 0.95 or needle=0.98,config=0.8)")
    for item in items:
        if "=" not in item:
            if overall is not None:
                raise BadInput(f"--fail-under {text!r}: two overall thresholds")
            overall = _threshold(item, "overall")
            continue
        suite, _, value = (part.strip() for part in item.partition("="))
        if is_baseline(suite):
            raise BadInput(
                f"--fail-under: {suite!r} is a no-context baseline, shown beside its suite and never gated "
                f"(gate {suite.removesuffix(NO_CONTEXT_SUFFIX)!r} instead)"
            )
        if suite not in suites:
            raise BadInput(
                f"--fail-under: suite {suite!r} is not in this run (its suites: {', '.join(suites)})"
            )
        if suite in per_suite:
            raise BadInput(f"--fail-under: suite {suite!r} given twice")
        per_suite[suite] = _threshold(value, suite)
    if overall is not None and suites and all(is_baseline(suite) for suite in suites):
        raise BadInput(
            "--fail-under: this run holds only no-context baselines, which are never gated (add their "
            "suites, e.g. --suite needle,needle~nocontext)"
        )
    return RecallGate(overall, per_suite)


def parse_retry(text: str) -> frozenset[str]:
    """--retry error,timeout: infrastructure outcomes whose cases run again on --resume."""
    chosen = frozenset(item.strip() for item in text.split(",") if item.strip())
    unknown = sorted(chosen - set(INFRA_OUTCOMES))
    if not chosen or unknown:
        raise BadInput(
            f"--retry {text!r}: retry takes infrastructure outcomes only ({', '.join(INFRA_OUTCOMES)}); "
            "answers from a live model are results, not failures"
        )
    return chosen


@dataclass(frozen=True)
class Verdict:
    exit_code: int
    lines: tuple[str, ...]  # one line per unmet threshold, or why nothing was measured


def _recall_line(name: str, row: pd.Series | None, threshold: float) -> str | None:
    """row: the stats.recall_table row of `name` (None: no case of it stored)."""
    if row is None or not row["answered"]:
        return f"{name}: no answer from a live model, below --fail-under {threshold:g}"
    if row["recall"] < threshold:
        passes, answered = int(row["passes"]), int(row["answered"])
        return f"{name}: recall {row['recall']:.3f} ({passes}/{answered}) below --fail-under {threshold:g}"
    return None


def _score_line(name: str, row: pd.Series, threshold: float) -> str | None:
    """row: the stats.score_table row of a scored suite (or of a run of scored suites only)."""
    if not row["answered"]:
        return f"{name}: no answer from a live model, below --fail-under {threshold:g}"
    if row["score"] < threshold:
        return f"{name}: mean score {row['score']:.3f} ({int(row['answered'])} answered) below --fail-under {threshold:g}"
    return None


def verdict(
    results: Iterable[Result], gate: RecallGate | None = None, where: str = "", scoring: str = "lenient"
) -> Verdict:
    """The exit code of a run that finished, and the lines that explain a non-zero one.
    where: what every line starts with (compare: "variant B, "); sweep leaves it empty. scoring: the
    headline verdict the recall is computed with (recall_eval.frame.headline_frame)."""
    results = list(results)
    from recall_eval.frame import frame_of, headline_frame, without_baselines
    from recall_eval.stats import recall_table, score_table

    frame = headline_frame(frame_of([(None, results)]), scoring)
    overall = recall_table(frame).iloc[0]
    if overall["answered"] == 0:
        outcomes = frame["outcome"].value_counts()
        counted = ", ".join(f"{o} {outcomes[o]}" for o in INFRA_OUTCOMES if o in outcomes)
        why = f" ({counted})" if counted else ""
        return Verdict(
            EXIT_NO_ANSWER, (f"{where}no case got an answer from a live model{why}: nothing was measured",)
        )
    if budget_eaten_by_reasoning(frame):
        budgets = [
            r.completion.completion_tokens for r in results if r.completion and r.completion.completion_tokens
        ]
        spent = f" ({max(budgets)} tokens)" if budgets else ""
        return Verdict(
            EXIT_BUDGET_TOO_SMALL,
            (
                f"{where}every answer was cut inside the model's reasoning: the answer budget{spent} is too "
                "small for this thinking model, so recall was not measured; raise --max-tokens (e.g. 4096)",
            ),
        )
    if gate is None:
        return Verdict(EXIT_OK, ())
    lines = []
    frame = without_baselines(frame)  # a no-context baseline is never gated
    scored = frame["metric"].notna()
    if gate.overall is not None:  # recall of the pass/miss suites; a run of scored suites only: its score
        if scored.all():
            lines.append(_score_line(f"{where}overall", score_table(frame).iloc[0], gate.overall))
        else:
            lines.append(_recall_line(f"{where}overall", recall_table(frame[~scored]).iloc[0], gate.overall))
    by_suite = recall_table(frame, by=["suite"])
    for suite, threshold in gate.per_suite.items():
        mine = frame[frame["suite"] == suite]
        if mine["metric"].notna().any():  # a scored suite is gated on its mean score
            lines.append(_score_line(f"{where}{suite}", score_table(mine).iloc[0], threshold))
            continue
        row = by_suite.loc[suite] if suite in by_suite.index else None
        lines.append(_recall_line(f"{where}{suite}", row, threshold))
    unmet = tuple(line for line in lines if line is not None)
    return Verdict(EXIT_BELOW_GATE if unmet else EXIT_OK, unmet)


@dataclass(frozen=True)
class Regression:
    """A variant whose recall is significantly lower than the baseline's (the first variant's) on the
    paired cases of a suite (or overall): the compare report's exact McNemar test, its Holm-adjusted p
    (over every test of the compare) below the alpha."""

    variant: str
    baseline: str
    suite: str  # a suite name, or "overall"
    recall_baseline: float  # recall of each over its own answered cases, as the report prints it
    recall_variant: float
    lost: int  # paired cases that pass under the baseline, not under the variant
    gained: int
    p_value: float
    alpha: float
    p_adjusted: float | None = None  # Holm over the compare's `family` tests; None: a family of one
    family: int = 1

    def line(self) -> str:
        return (
            f"variant {self.variant}, {self.suite}: recall {self.recall_baseline:.3f} -> "
            f"{self.recall_variant:.3f} against {self.baseline}, {self.lost} pass->miss and {self.gained} "
            f"miss->pass on paired cases, exact McNemar p = {self.p_value:.2g}"
            f"{_holm_text(self.p_adjusted, self.family)} < {self.alpha:g} (--fail-on-regression)"
        )


@dataclass(frozen=True)
class ScoreRegression:
    """A variant whose scores are significantly lower than the baseline's on the paired cases of a scored
    suite (or of every scored suite): the compare report's mean score difference and Wilcoxon
    signed-rank test (recall_eval.stats.ScoredPairedTest), its Holm-adjusted p below the alpha."""

    variant: str
    baseline: str
    suite: str  # a scored suite's name, or "overall"
    test: ScoredPairedTest
    alpha: float
    p_adjusted: float | None = None  # Holm over the compare's `family` tests; None: a family of one
    family: int = 1

    def line(self) -> str:
        holm = _holm_text(self.p_adjusted, self.family)
        return (
            f"variant {self.variant}, {self.suite}: {score_change_text(self.test)} against {self.baseline}"
            f"{holm or ', p'} < {self.alpha:g} (--fail-on-regression)"
        )


def _holm_text(p_adjusted: float | None, family: int) -> str:
    """How a regression line names the multiple-testing correction: nothing for a family of one."""
    if p_adjusted is None or family <= 1:
        return ""
    return f", Holm-adjusted p over {family} tests = {p_adjusted:.2g}"


def compare_verdict(
    variants: Sequence[tuple[str, Iterable[Result]]],
    gate: RecallGate | None = None,
    regressions: Sequence[Regression | ScoreRegression] = (),
    scoring: str = "lenient",
) -> Verdict:
    """The exit code of a compare that finished: each variant judged as a sweep's run is (3 when one
    got no answer from a live model, its lines first; 5 when one's answers were all cut inside its
    reasoning; 4 for a threshold it missed), and 4 for each regression; the lines name the variant."""
    endings = [verdict(results, gate, f"variant {label}, ", scoring) for label, results in variants]
    for code in (EXIT_NO_ANSWER, EXIT_BUDGET_TOO_SMALL):
        lines = [line for ending in endings if ending.exit_code == code for line in ending.lines]
        if lines:
            return Verdict(code, tuple(lines))
    unmet = [line for ending in endings for line in ending.lines] + [r.line() for r in regressions]
    return Verdict(EXIT_BELOW_GATE if unmet else EXIT_OK, tuple(unmet))


def study_verdict(
    cells: Sequence[tuple[str, Iterable[Result]]],
    worse: Sequence[str],
    gate: RecallGate | None = None,
    scoring: str = "lenient",
) -> Verdict:
    """The exit code of a study that finished: 3 when a cell is significantly worse than the baseline
    after correction (`worse`: one line each), else 4 for each cell below --fail-under (a cell with no
    answer from a live model is below any gate), else 0."""
    if worse:
        return Verdict(EXIT_CELL_WORSE, tuple(worse))
    if gate is None:
        return Verdict(EXIT_OK, ())
    lines = [
        line for label, results in cells for line in verdict(results, gate, f"cell {label}, ", scoring).lines
    ]
    return Verdict(EXIT_BELOW_GATE if lines else EXIT_OK, tuple(lines))
