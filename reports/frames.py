"""Stored results -> aggregates for reports: per-cell recall, per-length recall and throughput, summary.

Pure functions of a list of Results (and the run's grid where given), so the single-run report,
a compare report and the indexer coverage view can all build on the same frames.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from recall_eval.stats import effective_length, percentile, recall_counts, wilson_interval
from recall_eval.types import INFRA_OUTCOMES, NOT_APPLICABLE_OUTCOMES, RECALL_OUTCOMES, Outcome, Result

ALL_OUTCOMES: tuple[Outcome, ...] = RECALL_OUTCOMES + INFRA_OUTCOMES + NOT_APPLICABLE_OUTCOMES
EFFECTIVE_RECALL = 0.9  # a length counts as "holding" at this recall or above (issue 2)


@dataclass(frozen=True)
class CellFrame:
    """One (suite, length, depth) cell of a heatmap."""

    suite: str
    target_tokens: int
    depth_percent: float
    outcomes: dict[Outcome, int]  # every outcome of ALL_OUTCOMES, zero where absent

    @property
    def total(self) -> int:
        return sum(self.outcomes.values())

    @property
    def passes(self) -> int:
        return self.outcomes["pass"]

    @property
    def answered(self) -> int:
        return sum(self.outcomes[o] for o in RECALL_OUTCOMES)

    @property
    def infra(self) -> int:
        return sum(self.outcomes[o] for o in INFRA_OUTCOMES)

    @property
    def not_applicable(self) -> int:
        return self.outcomes["not_applicable"]

    @property
    def recall(self) -> float | None:
        """Passes over answered cases; None when nothing was answered (empty or all infrastructure)."""
        return self.passes / self.answered if self.answered else None

    @property
    def infra_outcomes(self) -> tuple[Outcome, ...]:
        """Infrastructure outcomes present in the cell, most frequent first (ties in taxonomy order)."""
        present = [o for o in INFRA_OUTCOMES if self.outcomes[o]]
        return tuple(sorted(present, key=lambda o: -self.outcomes[o]))


@dataclass(frozen=True)
class SuiteGrid:
    """A suite's heatmap: lengths (x) by depths (y); cells[d][l] is None where no case was stored."""

    suite: str
    lengths: tuple[int, ...]
    depths: tuple[float, ...]
    cells: tuple[tuple[CellFrame | None, ...], ...]


@dataclass(frozen=True)
class LengthFrame:
    """Recall and throughput of every case at one target length (all suites together)."""

    target_tokens: int
    cases: int
    passes: int
    answered: int
    prompt_tokens_p50: float | None  # what the server actually saw (usage, else calibration)
    ttft_p50_s: float | None
    ttft_p95_s: float | None
    prefill_tps_p50: float | None  # prompt tokens / TTFT
    decode_tps_p50: float | None  # (completion tokens - 1) / sum of inter-token gaps
    timed: int  # requests with client timings (a completion from a live server)

    @property
    def recall(self) -> float | None:
        return self.passes / self.answered if self.answered else None


@dataclass(frozen=True)
class Summary:
    """The headline numbers of a set of results."""

    cases: int
    passes: int
    answered: int
    recall: float | None
    ci_low: float
    ci_high: float
    effective_length: int | None
    threshold: float
    outcomes: dict[Outcome, int] = field(default_factory=dict)  # every outcome, zero where absent

    @property
    def infra(self) -> int:
        return sum(self.outcomes[o] for o in INFRA_OUTCOMES)

    @property
    def not_applicable(self) -> int:
        return self.outcomes.get("not_applicable", 0)


def latest_per_case(results: Iterable[Result]) -> list[Result]:
    """One result per (variant, case id), the last stored one winning, in a stable order.

    The store keeps each case once; this guards the report against a re-run case being counted twice
    and makes it independent of the order in which concurrent cases finished.
    """
    latest: dict[tuple[str, str], Result] = {}
    for result in results:
        latest[(result.variant, result.case_id)] = result
    return sorted(latest.values(), key=_case_order)


def _case_order(result: Result) -> tuple[str, int, float, int, str]:
    return (result.suite, result.target_tokens, result.depth_percent, result.trial, result.case_id)


def count_outcomes(results: Iterable[Result]) -> dict[Outcome, int]:
    counts = Counter(r.outcome for r in results)
    return {o: counts.get(o, 0) for o in ALL_OUTCOMES}


def recall_by_length(results: Iterable[Result]) -> dict[int, float | None]:
    """Recall per target length over answered cases; None where a length has no answered case.
    Lengths where every case was not applicable are left out (nothing was measured there)."""
    by_length: dict[int, list[Result]] = {}
    for result in results:
        if result.outcome in NOT_APPLICABLE_OUTCOMES:
            continue
        by_length.setdefault(result.target_tokens, []).append(result)
    out: dict[int, float | None] = {}
    for length in sorted(by_length):
        passes, answered = recall_counts(by_length[length])
        out[length] = passes / answered if answered else None
    return out


def summarize(results: Sequence[Result], threshold: float = EFFECTIVE_RECALL) -> Summary:
    passes, answered = recall_counts(results)
    low, high = wilson_interval(passes, answered)
    return Summary(
        cases=len(results),
        passes=passes,
        answered=answered,
        recall=passes / answered if answered else None,
        ci_low=low,
        ci_high=high,
        effective_length=effective_length(recall_by_length(results), threshold),
        threshold=threshold,
        outcomes=count_outcomes(results),
    )


def suite_grid(
    results: Sequence[Result],
    suite: str,
    lengths: Iterable[int] = (),
    depths: Iterable[float] = (),
) -> SuiteGrid:
    """The suite's cells over the union of the planned grid (lengths, depths) and what was stored."""
    mine = [r for r in results if r.suite == suite]
    all_lengths = tuple(sorted(set(lengths) | {r.target_tokens for r in mine}))
    all_depths = tuple(sorted(set(depths) | {r.depth_percent for r in mine}))
    grouped: dict[tuple[int, float], list[Result]] = {}
    for result in mine:
        grouped.setdefault((result.target_tokens, result.depth_percent), []).append(result)
    rows = []
    for depth in all_depths:
        row = []
        for length in all_lengths:
            members = grouped.get((length, depth))
            row.append(CellFrame(suite, length, depth, count_outcomes(members)) if members else None)
        rows.append(tuple(row))
    return SuiteGrid(suite=suite, lengths=all_lengths, depths=all_depths, cells=tuple(rows))


def suites_in(results: Iterable[Result], planned: Iterable[str] = ()) -> tuple[str, ...]:
    """Suites to show: the planned ones in their order, then any others found in the results."""
    order = list(dict.fromkeys(planned))
    for result in results:
        if result.suite not in order:
            order.append(result.suite)
    return tuple(order)


def _prompt_tokens(result: Result) -> int | None:
    completion = result.completion
    if completion is not None and completion.prompt_tokens:
        return completion.prompt_tokens
    return result.prompt_tokens


def _prefill_tps(result: Result) -> float | None:
    completion = result.completion
    tokens = _prompt_tokens(result)
    if completion is None or not tokens or not completion.ttft_s:
        return None
    return tokens / completion.ttft_s


def length_frames(results: Sequence[Result]) -> list[LengthFrame]:
    """Per target length: recall and the throughput of requests that got a completion."""
    by_length: dict[int, list[Result]] = {}
    for result in results:
        by_length.setdefault(result.target_tokens, []).append(result)
    frames = []
    for length in sorted(by_length):
        members = by_length[length]
        passes, answered = recall_counts(members)
        completions = [r.completion for r in members if r.completion is not None]
        ttfts = [c.ttft_s for c in completions if c.ttft_s is not None]
        prefill = [v for v in (_prefill_tps(r) for r in members) if v is not None]
        decode = [v for v in (c.decode_tokens_per_s for c in completions) if v is not None]
        prompt = [float(v) for v in (_prompt_tokens(r) for r in members) if v is not None]
        frames.append(
            LengthFrame(
                target_tokens=length,
                cases=len(members),
                passes=passes,
                answered=answered,
                prompt_tokens_p50=percentile(prompt, 50),
                ttft_p50_s=percentile(ttfts, 50),
                ttft_p95_s=percentile(ttfts, 95),
                prefill_tps_p50=percentile(prefill, 50),
                decode_tps_p50=percentile(decode, 50),
                timed=len(ttfts),
            )
        )
    return frames


def failures(results: Iterable[Result]) -> list[Result]:
    """Every result that did not pass, in grid order (suite, length, depth, trial); not-applicable
    cells are not failures (the heatmap shows them as N/A)."""
    return sorted(
        (r for r in results if r.outcome != "pass" and r.outcome not in NOT_APPLICABLE_OUTCOMES),
        key=_case_order,
    )


def tokenizers_used(results: Iterable[Result]) -> dict[str, int]:
    """Which tokenizer measured the prompts, with how many cases each (None -> 'unknown')."""
    counts = Counter(r.tokenizer or "unknown" for r in results)
    return dict(sorted(counts.items()))
