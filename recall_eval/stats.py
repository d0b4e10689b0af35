"""Small, dependency-free statistics for recall reports: intervals, effective length, paired tests.

Everything here is a pure function of its arguments; reports and the compare command share them.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence

from recall_eval.types import RECALL_OUTCOMES, Result


def wilson_interval(k: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """Wilson score interval for k successes in n trials (z=1.96: 95%).

    With n == 0 nothing is known, so the interval is the whole range (0.0, 1.0).
    """
    if n < 0 or k < 0 or k > n:
        raise ValueError(f"wilson_interval needs 0 <= k <= n, got k={k}, n={n}")
    if n == 0:
        return (0.0, 1.0)
    p = k / n
    z2 = z * z
    denom = 1.0 + z2 / n
    centre = (p + z2 / (2 * n)) / denom
    half = (z / denom) * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n))
    # Clamp the rounding noise at the ends (k == 0 gives lo == 0 exactly in exact arithmetic).
    return (max(0.0, centre - half), min(1.0, centre + half))


def recall_counts(results: Iterable[Result]) -> tuple[int, int]:
    """(passes, answered): answered counts only outcomes from a live model (RECALL_OUTCOMES)."""
    passes = answered = 0
    for result in results:
        if result.outcome in RECALL_OUTCOMES:
            answered += 1
            passes += result.outcome == "pass"
    return passes, answered


def recall(results: Iterable[Result]) -> float | None:
    """Share of answered cases that passed; None when no case was answered by a live model.

    Infrastructure outcomes (too_long, oom, crash, timeout, error) are left out entirely:
    they say nothing about whether the model recalled the fact.
    """
    passes, answered = recall_counts(results)
    return passes / answered if answered else None


def effective_length(recall_by_length: Mapping[int, float | None], threshold: float = 0.9) -> int | None:
    """Longest length L such that L and every shorter length have recall >= threshold.

    None when the shortest length already fails. A length whose recall is None (no answered case,
    e.g. all OOM) has not shown recall >= threshold, so it ends the run of good lengths too.
    """
    best: int | None = None
    for length in sorted(recall_by_length):
        value = recall_by_length[length]
        if value is None or value < threshold:
            break
        best = length
    return best


def mcnemar_exact(b: int, c: int) -> float:
    """Two-sided exact McNemar p-value for paired outcomes.

    b and c are the discordant pair counts (pass in A only, pass in B only). Under the null each
    discordant pair goes either way with probability 1/2, so the p-value is the two-sided binomial
    test of min(b, c) in b + c trials at p = 0.5 (doubling the smaller tail, capped at 1).
    """
    if b < 0 or c < 0:
        raise ValueError(f"mcnemar_exact needs non-negative counts, got b={b}, c={c}")
    n = b + c
    if n == 0:
        return 1.0
    low = min(b, c)
    tail = sum(math.comb(n, i) for i in range(low + 1))
    # Exact integer arithmetic until the one division: no underflow for large n.
    return min(1.0, 2 * tail / 2**n)


def percentile(values: Sequence[float], q: float) -> float | None:
    """q-th percentile (0..100) with linear interpolation between order statistics (numpy's default).

    None for an empty sequence.
    """
    if not 0 <= q <= 100:
        raise ValueError(f"percentile q must be within 0..100, got {q}")
    if not values:
        return None
    ordered = sorted(values)
    position = (len(ordered) - 1) * q / 100
    below = math.floor(position)
    above = min(below + 1, len(ordered) - 1)
    fraction = position - below
    return ordered[below] + (ordered[above] - ordered[below]) * fraction
