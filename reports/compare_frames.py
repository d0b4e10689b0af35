"""The numbers of a compare report, computed from stored runs only (no server, no rendering).

One VariantFrame per variant (recall per suite/length/cell with Wilson intervals, effective length,
throughput medians, time to ready, memory plan), and one PairFrame per variant against the first
(on identical cases, overall, per suite and per length: exact McNemar for pass/miss suites, the mean
score difference with the Wilcoxon signed-rank test for scored suites; recall differences per cell, mean
score differences for scored suites; per-case speed changes). Everything is aggregated with pandas from each run's results frame.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import pandas as pd

from recall_eval.engines import launched
from recall_eval.frame import frame_of, headline_frame
from recall_eval.placement_store import lifetime, read_placements, shared_nodes
from recall_eval.stats import (
    PairedTest,
    ScoredPairedTest,
    holm_adjust,
    matched,
    median_change_ci,
    median_sign_test,
    paired_test,
    paired_tests_by,
    percentile,
    scored_paired_test,
)
from recall_eval.target_facts import find_key, target_facts
from recall_eval.types import Result, Run
from reports import aggregates
from reports.task_scores import ScoreSummary, score_summary


@dataclass(frozen=True)
class VariantRun:
    """One variant's stored run, as the compare report reads it."""

    label: str
    run_dir: Path
    run: Run
    results: list[Result]  # one per case id (aggregates.latest_per_case)
    reused: bool = False  # an earlier finished run was reused by this compare
    age_s: float | None = None  # reused: seconds from the run's end to the compare's start
    scoring: str = "lenient"  # the compare's headline verdict (recall_eval.frame.headline_frame)

    @cached_property
    def frame(self) -> pd.DataFrame:
        """The run's results frame (recall_eval.frame)."""
        return headline_frame(frame_of([(self.run, self.results)]), self.scoring)


@dataclass(frozen=True)
class Throughput:
    """Medians over answered requests (None where nothing was measured)."""

    ttft_s: float | None
    prefill_tps: float | None
    decode_tps: float | None
    samples: int


METRICS: tuple[tuple[str, str, bool], ...] = (
    # (results frame column and Throughput attribute, label, higher is better)
    ("ttft_s", "TTFT p50", False),
    ("prefill_tps", "prefill tok/s p50", True),
    ("decode_tps", "decode tok/s p50", True),
)


def throughput_of(frame: pd.DataFrame) -> Throughput:
    return Throughput(
        ttft_s=percentile(frame["ttft_s"], 50),
        prefill_tps=percentile(frame["prefill_tps"], 50),
        decode_tps=percentile(frame["decode_tps"], 50),
        samples=int(frame["ttft_s"].notna().sum()),
    )


@dataclass(frozen=True)
class SpeedChange:
    """One metric on the cases timed under both variants: B against A, case by case."""

    cases: int  # cases with the metric measured under both
    median_change_pct: float | None  # median over cases of (B - A) / A, in percent
    # 95% interval of that median: the sign test's own (stats.median_sign_test) for interleaved runs, a
    # bootstrap interval of the spread (stats.median_change_ci) for sequential ones
    ci_low_pct: float | None
    ci_high_pct: float | None
    better: int  # cases where B was better (for TTFT: lower); ties left out
    worse: int
    # exact sign test: only when the two runs were interleaved on live servers at the same time;
    # for sequential runs the cases are not exchangeable (machine drift), so no p-value is given
    p_value: float | None


def speed_changes(a: pd.DataFrame, b: pd.DataFrame, interleaved: bool) -> dict[str, SpeedChange]:
    both = matched(a, b)
    changes = {}
    for name, _, higher_is_better in METRICS:
        pairs = both[[f"{name}_a", f"{name}_b"]].dropna()
        va, vb = pairs[f"{name}_a"], pairs[f"{name}_b"]
        pct = ((vb - va) / va * 100.0)[va > 0]
        up, down = int((vb > va).sum()), int((vb < va).sum())
        better, worse = (up, down) if higher_is_better else (down, up)
        # interleaved: the sign test gives the p-value and its own interval of the median (one test, so the
        # interval excludes 0 exactly when the change is significant); sequential: a bootstrap interval
        # of the spread, no p-value
        tested = median_sign_test(pct) if interleaved else None
        ci = tested[1] if tested is not None else (None if interleaved else median_change_ci(pct))
        changes[name] = SpeedChange(
            cases=len(pairs),
            median_change_pct=percentile(pct, 50),
            ci_low_pct=ci[0] if ci else None,
            ci_high_pct=ci[1] if ci else None,
            better=better,
            worse=worse,
            p_value=tested[0] if tested is not None else None,
        )
    return changes


@dataclass(frozen=True)
class MemoryPlan:
    """Server start and memory plan as the server reported them (None where it did not)."""

    max_total_num_tokens: int | None
    kv_bytes_per_token: int | None
    time_to_ready_s: float | None
    index_k_dtype: str | None = None
    index_topk: int | None = None


def memory_plan_of(run: Run) -> MemoryPlan:
    facts = target_facts(run)  # launched or learned; None (shown as unknown) otherwise
    tokens = find_key(run.server_info, ("max_total_num_tokens", "max_total_tokens"))
    per_token = find_key(run.server_info, ("kv_bytes_per_token", "kv_cache_bytes_per_token"))
    return MemoryPlan(
        max_total_num_tokens=int(tokens) if isinstance(tokens, int | float) else None,
        kv_bytes_per_token=int(per_token) if isinstance(per_token, int | float) else None,
        time_to_ready_s=run.time_to_ready_s,
        index_k_dtype=facts.index_k_dtype,
        index_topk=facts.index_topk,
    )


@dataclass(frozen=True)
class VariantFrame:
    label: str
    run_id: str
    run_dir: Path
    status: str
    profile_summary: str
    summary: aggregates.Summary  # every case: counts and outcomes (its recall pools scored cases: not shown)
    recall_summary: aggregates.Summary  # pass/miss suites only: recall with Wilson interval, effective length
    scores: ScoreSummary | None  # scored suites only: mean score, by length, RULER effective length
    suite_summaries: dict[str, aggregates.Summary]
    grids: dict[str, aggregates.SuiteGrid]  # per suite, over the compare's common lengths and depths
    lengths: dict[int, aggregates.LengthFrame]  # per length: pass/miss recall with interval, throughput
    throughput: Throughput  # medians over every answered request
    memory: MemoryPlan
    interleaved: bool = False  # run.json: its requests were interleaved with another variant's
    reused: bool = False  # an earlier finished run was reused by this compare
    reused_age_s: float | None = None  # reused: seconds from the run's end to the compare's start
    started_median: float | None = None  # median unix time its timed cases started (when it ran)

    @property
    def effective_length(self) -> int | None:
        """Of the pass/miss suites (pooled when several); scored suites have scores.ruler_effective_length."""
        return self.recall_summary.effective_length


def _profile_summary(run: Run) -> str:
    profile = run.profile
    if profile is None:
        return "unknown server"
    facts = target_facts(run)
    known = f"index keys {facts.shown('index_k_dtype')}, index_topk {facts.shown('index_topk')}"
    if not launched(profile) or profile.base_url:
        return f"running server at {profile.base_url} ({known})"
    parts = [f"{profile.name} ({profile.engine})", known]
    if profile.mem_fraction_static is not None:
        parts.append(f"mem {profile.mem_fraction_static:g}")
    if profile.context_length is not None:
        parts.append(f"ctx {profile.context_length:,}")
    return ", ".join(parts)


def variant_frame(
    variant: VariantRun, suites: list[str], lengths: list[int], depths: list[float]
) -> VariantFrame:
    frame = variant.frame
    return VariantFrame(
        label=variant.label,
        run_id=variant.run.run_id,
        run_dir=variant.run_dir,
        status=variant.run.status,
        profile_summary=_profile_summary(variant.run),
        summary=aggregates.summarize(frame, planned=suites),
        recall_summary=aggregates.summarize(aggregates.pass_miss(frame), planned=suites),
        scores=score_summary(frame, tuple(suites)),
        suite_summaries={suite: aggregates.summarize(frame[frame["suite"] == suite]) for suite in suites},
        grids={suite: aggregates.suite_grid(frame, suite, lengths, depths) for suite in suites},
        lengths={row.target_tokens: row for row in aggregates.length_frames(frame)},
        throughput=throughput_of(frame),
        memory=memory_plan_of(variant.run),
        interleaved=variant.run.interleaved,
        reused=variant.reused,
        reused_age_s=variant.age_s,
        started_median=percentile(frame["started_at"][frame["ttft_s"].notna()], 50),
    )


def _pct_change(base: float | None, new: float | None) -> float | None:
    if base is None or new is None or base == 0:
        return None
    return (new - base) / base * 100.0


@dataclass(frozen=True)
class DiffGrid:
    """Recall B - A per cell of one suite (mean score B - A for a scored suite); None where either side
    has no answered case there."""

    suite: str
    lengths: tuple[int, ...]
    depths: tuple[float, ...]
    values: tuple[tuple[float | None, ...], ...]  # values[depth index][length index]
    scored: bool = False  # the values are differences of mean scores, not of recall


def diff_grid(a: aggregates.SuiteGrid, b: aggregates.SuiteGrid) -> DiffGrid:
    if (a.lengths, a.depths) != (b.lengths, b.depths):
        raise ValueError(f"suite {a.suite}: the two grids differ in lengths or depths")
    cells = [cell for grid in (a, b) for row in grid.cells for cell in row if cell is not None]
    scored = any(cell.score is not None for cell in cells)

    def value(cell: aggregates.CellFrame | None) -> float | None:
        if cell is None:
            return None
        return cell.score if scored else cell.recall

    rows = []
    for row_a, row_b in zip(a.cells, b.cells, strict=True):
        row = []
        for cell_a, cell_b in zip(row_a, row_b, strict=True):
            value_a, value_b = value(cell_a), value(cell_b)
            row.append(None if value_a is None or value_b is None else value_b - value_a)
        rows.append(tuple(row))
    return DiffGrid(suite=a.suite, lengths=a.lengths, depths=a.depths, values=tuple(rows), scored=scored)


@dataclass(frozen=True)
class PairFrame:
    """Variant B against the baseline A (the first variant)."""

    a: VariantFrame
    b: VariantFrame
    overall: PairedTest  # exact McNemar over the cases of pass/miss suites
    by_suite: dict[str, PairedTest]  # pass/miss suites only
    by_length: dict[int, PairedTest]  # lengths with a pass/miss case
    diff_grids: dict[str, DiffGrid]  # per suite: recall B - A per cell (mean score B - A for a scored suite)
    # scored suites: mean score difference and Wilcoxon signed-rank, over every scored case (None when
    # no suite is scored), per scored suite, and per length with a scored case
    scored_overall: ScoredPairedTest | None = None
    scored_by_suite: dict[str, ScoredPairedTest] = field(default_factory=dict)
    scored_by_length: dict[int, ScoredPairedTest] = field(default_factory=dict)
    # Holm-adjusted p of the pass/miss tests per suite ("suite:NAME") and per length ("length:N"), each
    # family adjusted apart: a table of many lengths shows some p < 0.05 by chance, the adjusted p does not
    p_holm: dict[str, float] = field(default_factory=dict)
    throughput_change: dict[str, float | None] = field(default_factory=dict)  # metric -> % change of medians
    speed_changes: dict[str, SpeedChange] = field(default_factory=dict)  # metric -> case-by-case change
    interleaved: bool = False  # both runs interleaved on live servers: a paired speed test is allowed
    # where the two runs' servers ran when placed on a cluster (placements.json): "shared node" (alive at
    # the same time on one node: each slowed the other), "same time" (at once, on different nodes), or
    # None (one after the other, or not placed on a cluster)
    placement: str | None = None

    @property
    def minutes_apart(self) -> float | None:
        """Minutes between the middle of the two runs' timed cases (sequential runs: how far apart)."""
        if self.a.started_median is None or self.b.started_median is None:
            return None
        return abs(self.b.started_median - self.a.started_median) / 60.0


def _split(frame: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(pass/miss suites' rows, scored suites' rows): a metric grades the scored ones."""
    scored = frame["metric"].notna()
    return frame[~scored], frame[scored]


def _holm_by_scope(kind: str, tests: dict[Any, PairedTest]) -> dict[str, float]:
    """Holm over one family of a pair's tests, keyed "KIND:KEY" as the report's scopes are."""
    adjusted = holm_adjust([test.p_value for test in tests.values()])
    return {f"{kind}:{key}": p for key, p in zip(tests, adjusted, strict=True)}


def placement_of(a_dir: Path, b_dir: Path) -> str | None:
    """How two runs' servers on a cluster shared it (PairFrame.placement)."""
    a, b = read_placements(a_dir), read_placements(b_dir)
    if a is None or b is None:
        return None
    if shared_nodes([a, b]):
        return "shared node"
    span_a, span_b = lifetime(a), lifetime(b)
    if span_a is None or span_b is None:
        return None
    inf = float("inf")
    overlap = span_a[0] < (span_b[1] or inf) and span_b[0] < (span_a[1] or inf)
    return "same time" if overlap else None


def pair_frame(
    a_run: VariantRun, b_run: VariantRun, a: VariantFrame, b: VariantFrame, interleaved: bool = False
) -> PairFrame:
    """B against A; interleaved (compare.json's word: these two runs' requests took turns with each
    other) allows a paired speed test. Both run.json files saying interleaved is not enough: each may
    have been interleaved with some other run."""
    (plain_a, scored_a), (plain_b, scored_b) = _split(a_run.frame), _split(b_run.frame)
    any_scored = len(scored_a) > 0 or len(scored_b) > 0
    by_suite = paired_tests_by(plain_a, plain_b, "suite", list(a.grids), paired_test)
    by_length = paired_tests_by(plain_a, plain_b, "target_tokens", None, paired_test)
    return PairFrame(
        a=a,
        b=b,
        overall=paired_test(plain_a, plain_b),
        by_suite=by_suite,
        by_length=by_length,
        p_holm=_holm_by_scope("suite", by_suite) | _holm_by_scope("length", by_length),
        scored_overall=scored_paired_test(scored_a, scored_b) if any_scored else None,
        scored_by_suite=paired_tests_by(scored_a, scored_b, "suite", list(a.grids), scored_paired_test),
        scored_by_length=paired_tests_by(scored_a, scored_b, "target_tokens", None, scored_paired_test),
        diff_grids={suite: diff_grid(a.grids[suite], b.grids[suite]) for suite in a.grids},
        throughput_change={
            name: _pct_change(getattr(a.throughput, name), getattr(b.throughput, name))
            for name, _, _ in METRICS
        },
        speed_changes=speed_changes(a_run.frame, b_run.frame, interleaved),
        interleaved=interleaved,
        placement=placement_of(a_run.run_dir, b_run.run_dir),
    )


@dataclass(frozen=True)
class CompareFrames:
    variants: list[VariantFrame]
    pairs: list[PairFrame]  # each variant against the first
    suites: list[str]
    lengths: list[int]
    depths: list[float]


def compare_frames(runs: list[VariantRun], interleaved: bool = False) -> CompareFrames:
    """Frames for every variant and for each variant against the first."""
    if len(runs) < 2:
        raise ValueError("a compare needs at least two runs")
    every = pd.concat([run.frame for run in runs], ignore_index=True)
    suites = list(aggregates.suites_in(every, runs[0].run.spec.suites))
    lengths = sorted(set(runs[0].run.spec.lengths) | {int(n) for n in every["target_tokens"]})
    depths = sorted(set(runs[0].run.spec.depths) | {float(d) for d in every["depth_percent"]})
    variants = [variant_frame(run, suites, lengths, depths) for run in runs]
    pairs = [
        pair_frame(runs[0], run, variants[0], frame, interleaved)
        for run, frame in zip(runs[1:], variants[1:], strict=True)
    ]
    return CompareFrames(variants=variants, pairs=pairs, suites=suites, lengths=lengths, depths=depths)
