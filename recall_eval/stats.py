"""The statistics of recall-eval, each defined once: recall with its Wilson interval, effective length,
exact paired tests (McNemar for pass/miss suites, Wilcoxon signed-rank on the score differences of
scored suites) and percentiles (scipy and numpy do the arithmetic).

Reports, the compare conclusion, the CI gates (--fail-under, --fail-on-regression), the console summary
and `export` all take their figures from here, applied
to the one-row-per-case table of recall_eval.frame (columns `counted`, `passed`, `target_tokens`, ...).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from scipy.stats import binomtest, bootstrap, quantile_test, ttest_1samp, wilcoxon

from recall_eval.types import INFRA_OUTCOMES, NOT_APPLICABLE_OUTCOMES

CONFIDENCE = 0.95  # every interval in the reports is a 95% interval
EFFECTIVE_RECALL = 0.9  # a length "holds" at this recall or above (effective length)
BOOTSTRAP_RESAMPLES = 2000
SIGNIFICANCE = 0.05  # a paired test's alpha: the compare report's wording and --fail-on-regression
BOOTSTRAP_SEED = 0  # fixed: a report re-rendered from the same results shows the same interval


def wilson_interval(k: int, n: int, confidence: float = CONFIDENCE) -> tuple[float, float] | None:
    """Wilson score interval for k successes in n trials (scipy's binomtest.proportion_ci).

    None for n == 0: with nothing answered there is no interval to show.
    """
    if n < 0 or k < 0 or k > n:
        raise ValueError(f"wilson_interval needs 0 <= k <= n, got k={k}, n={n}")
    if n == 0:
        return None
    ci = binomtest(int(k), int(n)).proportion_ci(confidence_level=confidence, method="wilson")
    return (float(ci.low), float(ci.high))


def recall_table(frame: pd.DataFrame, by: Sequence[str] = ()) -> pd.DataFrame:
    """Recall per group of a results frame: the one definition of recall.

    recall = passes / answered, where answered counts only outcomes from a live model (the frame's
    `counted` column: pass, miss, empty, truncated). Infrastructure outcomes (too_long, oom, crash,
    timeout, error) are counted in `infra`, cells the suite cannot build in `not_applicable`; neither
    enters recall. Columns: cases, answered, passes, infra, not_applicable, recall (NaN where nothing was
    answered), ci_low, ci_high (95% Wilson; NaN likewise).
    With no `by`, one row (index 0) for the whole frame.
    """
    parts = frame.assign(
        cases=1,
        answered=frame["counted"].astype(int),
        passes=frame["passed"].astype(int),
        infra=frame["outcome"].isin(INFRA_OUTCOMES).astype(int),
        not_applicable=frame["outcome"].isin(NOT_APPLICABLE_OUTCOMES).astype(int),
    )
    columns = ["cases", "answered", "passes", "infra", "not_applicable"]
    if by:
        table = parts.groupby(list(by), sort=True)[columns].sum()
    else:
        table = pd.DataFrame([parts[columns].sum()], index=[0]).astype(int)
    answered = table["answered"].where(table["answered"] > 0)
    table["recall"] = table["passes"] / answered
    bounds = [
        wilson_interval(k, n) or (np.nan, np.nan)
        for k, n in zip(table["passes"], table["answered"], strict=True)
    ]
    table["ci_low"] = [low for low, _ in bounds]
    table["ci_high"] = [high for _, high in bounds]
    return table


def score_table(frame: pd.DataFrame, by: Sequence[str] = ()) -> pd.DataFrame:
    """Mean metric score per group of a results frame: the one definition of a scored suite's figure.

    score = mean of `score` over the answered cases (the frame's `counted` column: a scored suite's
    empty or truncated answer is graded too, RULER-style); infrastructure and not_applicable cases
    have no score and are left out. Columns: answered, score (NaN where nothing was answered).
    """
    answered = frame[frame["counted"] & frame["score"].notna()]
    if by:
        table = answered.groupby(list(by), sort=True)["score"].agg(["count", "mean"])
    else:
        table = pd.DataFrame({"count": [len(answered)], "mean": [answered["score"].mean()]})
    return table.rename(columns={"count": "answered", "mean": "score"})


def effective_length(
    recall_by_length: Mapping[int, float | None] | pd.Series, threshold: float = EFFECTIVE_RECALL
) -> int | None:
    """Longest length L such that L and every shorter length have recall >= threshold.

    None when the shortest length already fails. A length whose recall is unknown (None or NaN: no
    answered case, e.g. all OOM) has not shown recall >= threshold, so it ends the run of good lengths.
    """
    series = pd.Series(recall_by_length, dtype=float).sort_index()
    holding = (series >= threshold).cumprod().astype(bool)  # NaN >= t is False
    good = series.index[holding.to_numpy()]
    return int(good[-1]) if len(good) else None


def effective_length_of(frame: pd.DataFrame, threshold: float = EFFECTIVE_RECALL) -> int | None:
    """Effective length of the cases in a results frame (one suite, or several: then it is pooled).

    Lengths where every case was not applicable are left out: nothing was measured there.
    """
    measured = frame[~frame["outcome"].isin(NOT_APPLICABLE_OUTCOMES)]
    if measured.empty:
        return None
    return effective_length(recall_table(measured, ["target_tokens"])["recall"], threshold)


def mcnemar_exact(b: int, c: int) -> float:
    """Two-sided exact McNemar p-value for paired outcomes with b and c discordant pairs.

    Under "no difference" each discordant pair goes either way with probability 1/2: the exact binomial
    test of b in b + c trials at p = 0.5. 1.0 when there is no discordant pair.
    """
    if b < 0 or c < 0:
        raise ValueError(f"mcnemar_exact needs non-negative counts, got b={b}, c={c}")
    if b + c == 0:
        return 1.0
    return float(binomtest(int(b), int(b + c), 0.5).pvalue)


def holm_adjust(p_values: Sequence[float]) -> list[float]:
    """Holm-Bonferroni step-down adjusted p-values of one family of tests, in the input order.

    Sorted ascending, the i-th smallest (0-based) of m is multiplied by m - i, the running maximum is
    kept (adjusted p-values never decrease with rank) and capped at 1. Rejecting where the adjusted p is
    below alpha controls the family-wise error rate at alpha (Holm 1979), under any dependence.
    """
    values = np.asarray(p_values, dtype=float)
    if values.size == 0:
        return []
    order = np.argsort(values, kind="stable")
    scaled = values[order] * (values.size - np.arange(values.size))
    adjusted = np.minimum(np.maximum.accumulate(scaled), 1.0)
    result = np.empty_like(adjusted)
    result[order] = adjusted
    return [float(p) for p in result]


def sign_test(better: int, worse: int) -> float:
    """Two-sided exact sign test (ties left out): the same binomial test as McNemar's."""
    return mcnemar_exact(better, worse)


def median_sign_test(
    changes: Sequence[float] | pd.Series, confidence: float = CONFIDENCE
) -> tuple[float, tuple[float, float] | None] | None:
    """The sign test of "median change = 0" and its own interval for the median (scipy.stats.quantile_test
    at the median: the binomial test on the signs, inverted over order statistics), so the interval
    excludes 0 exactly when p < 1 - confidence: one test for both the p-value and the interval. The
    interval is None where too few cases bound it. Ties (no change) are left out, as in sign_test. None
    when no case changed."""
    array = np.asarray(changes, dtype=float)
    array = array[~np.isnan(array) & (array != 0)]
    if not array.size:
        return None
    result = quantile_test(array, q=0.0, p=0.5)
    interval = result.confidence_interval(confidence_level=confidence)
    low, high = float(interval.low), float(interval.high)
    bounded = not (np.isnan(low) or np.isnan(high))
    return float(result.pvalue), ((low, high) if bounded else None)


def matched(a: pd.DataFrame, b: pd.DataFrame) -> pd.DataFrame:
    """Cases present in both frames, joined on case id (columns suffixed _a and _b)."""
    return a.merge(b, on="case_id", suffixes=("_a", "_b"), how="inner")


@dataclass(frozen=True)
class PairedTest:
    """Exact McNemar on identical cases (same case id) of a baseline A and a variant B."""

    both_pass: int
    both_fail: int
    lost: int  # pass under A, not under B (pass -> miss)
    gained: int  # not under A, pass under B (miss -> pass)
    # pairs where either side is an infrastructure outcome (or only one side not applicable): not in the test
    excluded_infra: int
    unpaired: int  # cases stored under only one of the two runs
    p_value: float

    @property
    def paired(self) -> int:
        return self.both_pass + self.both_fail + self.lost + self.gained


def _scored(frame: pd.DataFrame) -> pd.Series:
    """True for the rows of scored suites (a metric grades them); False for pass/miss ones."""
    return frame["metric"].notna() if "metric" in frame else pd.Series(False, index=frame.index)


def paired_test(a_frame: pd.DataFrame, b_frame: pd.DataFrame) -> PairedTest:
    """The exact McNemar test of two results frames on their shared case ids (see PairedTest), over the
    cases of pass/miss suites only: scored suites' cases go to scored_paired_test."""
    a_frame, b_frame = a_frame[~_scored(a_frame)], b_frame[~_scored(b_frame)]
    both = matched(a_frame, b_frame)
    # a cell neither side could build: nothing to compare, nothing to flag
    both = both[
        ~(both["outcome_a"].isin(NOT_APPLICABLE_OUTCOMES) & both["outcome_b"].isin(NOT_APPLICABLE_OUTCOMES))
    ]
    live = both[both["counted_a"] & both["counted_b"]]
    table = pd.crosstab(live["passed_a"], live["passed_b"]).reindex(
        index=[True, False], columns=[True, False], fill_value=0
    )
    lost, gained = int(table.at[True, False]), int(table.at[False, True])
    unpaired = len(set(a_frame["case_id"]) ^ set(b_frame["case_id"]))
    return PairedTest(
        both_pass=int(table.at[True, True]),
        both_fail=int(table.at[False, False]),
        lost=lost,
        gained=gained,
        excluded_infra=len(both) - len(live),
        unpaired=unpaired,
        p_value=mcnemar_exact(lost, gained),
    )


@dataclass(frozen=True)
class ScoredPairedTest:
    """Scored suites (a metric's grade in [0, 1] per case) on identical cases of a baseline A and a
    variant B: the per-case differences B - A, their mean with a 95% t interval, and the two-sided
    Wilcoxon signed-rank test (scipy.stats.wilcoxon; zero differences dropped, so its n is `changed`)."""

    paired: int  # cases answered by a live model under both, each with a score
    mean_a: float | None  # mean score of A over the paired cases (None when nothing is paired)
    mean_b: float | None
    mean_diff: float | None  # mean of B - A over the paired cases
    ci_low: float | None  # 95% t interval of mean_diff (None below two pairs; a point when all are equal)
    ci_high: float | None
    higher: int  # cases scored higher under B
    lower: int  # cases scored lower under B
    # cases where either side is an infrastructure outcome (or only one side not applicable): not in the test
    excluded_infra: int
    unpaired: int  # cases stored under only one of the two runs
    p_value: float  # Wilcoxon signed-rank, two-sided; 1.0 when no case changed

    @property
    def changed(self) -> int:
        """The test's n: pairs whose scores differ."""
        return self.higher + self.lower

    def lower_at(self, alpha: float) -> bool:
        """B scores significantly lower than A: p below alpha and the differences lean down."""
        return self.p_value < alpha and self.mean_diff is not None and self.mean_diff < 0

    def higher_at(self, alpha: float) -> bool:
        return self.p_value < alpha and self.mean_diff is not None and self.mean_diff > 0


def mean_diff_interval(diffs: np.ndarray, confidence: float = CONFIDENCE) -> tuple[float, float] | None:
    """Student t interval of the mean of paired differences (scipy.stats.ttest_1samp); None below two
    differences, the point itself when every difference is equal."""
    if diffs.size < 2:
        return None
    if np.all(diffs == diffs[0]):
        return (float(diffs[0]), float(diffs[0]))
    ci = ttest_1samp(diffs, 0.0).confidence_interval(confidence_level=confidence)
    return (float(ci.low), float(ci.high))


def signed_rank_p(diffs: np.ndarray) -> float:
    """Two-sided Wilcoxon signed-rank p-value of paired differences, zeros dropped (scipy picks the
    exact distribution for small n, the normal approximation otherwise); 1.0 when none is non-zero."""
    changed = diffs[diffs != 0]
    if changed.size == 0:
        return 1.0
    return float(wilcoxon(changed).pvalue)


def scored_paired_test(a_frame: pd.DataFrame, b_frame: pd.DataFrame) -> ScoredPairedTest:
    """The paired comparison of two results frames' scored cases on their shared case ids (see
    ScoredPairedTest); pass/miss suites' cases are left to paired_test."""
    a_frame, b_frame = a_frame[_scored(a_frame)], b_frame[_scored(b_frame)]
    both = matched(a_frame, b_frame)
    both = both[
        ~(both["outcome_a"].isin(NOT_APPLICABLE_OUTCOMES) & both["outcome_b"].isin(NOT_APPLICABLE_OUTCOMES))
    ]
    live = both[both["counted_a"] & both["counted_b"] & both["score_a"].notna() & both["score_b"].notna()]
    diffs = (live["score_b"] - live["score_a"]).to_numpy(dtype=float)
    interval = mean_diff_interval(diffs)
    return ScoredPairedTest(
        paired=len(live),
        mean_a=float(live["score_a"].mean()) if len(live) else None,
        mean_b=float(live["score_b"].mean()) if len(live) else None,
        mean_diff=float(diffs.mean()) if diffs.size else None,
        ci_low=interval[0] if interval else None,
        ci_high=interval[1] if interval else None,
        higher=int((diffs > 0).sum()),
        lower=int((diffs < 0).sum()),
        excluded_infra=len(both) - len(live),
        unpaired=len(set(a_frame["case_id"]) ^ set(b_frame["case_id"])),
        p_value=signed_rank_p(diffs),
    )


def either_paired_test(a_frame: pd.DataFrame, b_frame: pd.DataFrame) -> PairedTest | ScoredPairedTest:
    """The paired test that fits one scope's cases: Wilcoxon signed-rank (scored_paired_test) when any
    of them is scored, else the exact McNemar (paired_test)."""
    scored = _scored(a_frame).any() or _scored(b_frame).any()
    return scored_paired_test(a_frame, b_frame) if scored else paired_test(a_frame, b_frame)


def paired_tests_by(
    a_frame: pd.DataFrame,
    b_frame: pd.DataFrame,
    column: str,
    keys: Sequence[Any] | None = None,
    test: Callable[[pd.DataFrame, pd.DataFrame], Any] = either_paired_test,
) -> dict[Any, Any]:
    """B against A per scope: for each value of `column` ("suite", "target_tokens") the paired test of its
    rows. keys: the values to test, in that order (default: every value in A or B, sorted); one found
    in neither frame is left out. The one scope split of the compare report, the baseline gate and a
    study; each then puts its tests into families for holm_adjust."""
    present = set(a_frame[column]) | set(b_frame[column])
    chosen = [key for key in keys if key in present] if keys is not None else sorted(present)
    return {
        _plain(key): test(a_frame[a_frame[column] == key], b_frame[b_frame[column] == key]) for key in chosen
    }


def _plain(value: Any) -> Any:
    """A numpy scalar (a frame's int64 length) as its Python value, for dict keys and JSON."""
    return value.item() if hasattr(value, "item") else value


def percentile(values: Sequence[float] | pd.Series, q: float) -> float | None:
    """q-th percentile (0..100), numpy's linear interpolation; NaNs ignored; None when nothing is left."""
    if not 0 <= q <= 100:
        raise ValueError(f"percentile q must be within 0..100, got {q}")
    array = np.asarray(values, dtype=float)
    array = array[~np.isnan(array)]
    return float(np.percentile(array, q)) if array.size else None


def median_ci(
    values: Sequence[float] | pd.Series, confidence: float = CONFIDENCE
) -> tuple[float, float] | None:
    """Bootstrap percentile interval of the median of per-case values (a cell's TTFT or decode tok/s):
    the same resampling as median_change_ci, which it is."""
    return median_change_ci(values, confidence)


def median_change_ci(
    changes: Sequence[float] | pd.Series, confidence: float = CONFIDENCE
) -> tuple[float, float] | None:
    """Bootstrap percentile interval of the median of per-case changes (scipy.stats.bootstrap).

    Resamples the matched cases (2,000 resamples, fixed seed). It describes case-to-case spread only:
    for runs made one after the other it cannot separate a real change from drift of the machine, so
    the reports pair it with no p-value. None for fewer than two cases or when every change is equal.
    """
    array = np.asarray(changes, dtype=float)
    array = array[~np.isnan(array)]
    if array.size < 2:
        return None
    if np.all(array == array[0]):
        return (float(array[0]), float(array[0]))
    result = bootstrap(
        (array,),
        np.median,
        confidence_level=confidence,
        n_resamples=BOOTSTRAP_RESAMPLES,
        method="percentile",
        rng=np.random.default_rng(BOOTSTRAP_SEED),
    )
    return (float(result.confidence_interval.low), float(result.confidence_interval.high))


def paired_drop_interval(
    test: PairedTest, confidence: float = CONFIDENCE
) -> tuple[float, float, float] | None:
    """The drop in recall from A to B on the paired cases, (drop, low, high) with its interval: Newcombe's
    hybrid score interval for a difference of paired proportions (Stat. Med. 17 (1998) 2635-2650,
    method 10), built from the two Wilson intervals and the phi correlation of the pairs. None when
    nothing is paired."""
    a, b, c, d = test.both_pass, test.lost, test.gained, test.both_fail
    n = a + b + c + d
    if n == 0:
        return None
    p1, p2 = (a + b) / n, (a + c) / n  # recall of A, of B
    l1, u1 = wilson_interval(a + b, n, confidence) or (p1, p1)
    l2, u2 = wilson_interval(a + c, n, confidence) or (p2, p2)
    margins = (a + b) * (c + d) * (a + c) * (b + d)
    phi = (a * d - b * c) / np.sqrt(margins) if margins else 0.0
    drop = p1 - p2
    low = drop - np.sqrt(max(0.0, (p1 - l1) ** 2 - 2 * phi * (p1 - l1) * (u2 - p2) + (u2 - p2) ** 2))
    high = drop + np.sqrt(max(0.0, (p2 - l2) ** 2 - 2 * phi * (p2 - l2) * (u1 - p1) + (u1 - p1) ** 2))
    return float(drop), float(max(-1.0, low)), float(min(1.0, high))
