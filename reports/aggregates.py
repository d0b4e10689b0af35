"""Results frame -> the aggregates a report shows: per-cell recall, per-length recall and throughput, summary.

Every function takes the one-row-per-case table of recall_eval.frame (a list of Results is turned into
one) and aggregates it with pandas; recall, its interval and effective length come from recall_eval.stats,
rates from the frame's prefill_tps / decode_tps columns. The small dataclasses below are what templates
and charts read.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from recall_eval.frame import frame_of, without_baselines
from recall_eval.stats import EFFECTIVE_RECALL, effective_length_of, percentile, recall_table, score_table
from recall_eval.types import INFRA_OUTCOMES, NOT_APPLICABLE_OUTCOMES, RECALL_OUTCOMES, Outcome, Result

ALL_OUTCOMES: tuple[Outcome, ...] = RECALL_OUTCOMES + INFRA_OUTCOMES + NOT_APPLICABLE_OUTCOMES
ResultsLike = pd.DataFrame | Sequence[Result]


def as_frame(data: ResultsLike) -> pd.DataFrame:
    """A results frame as is; a list of Results (without their run) as a results frame."""
    return data if isinstance(data, pd.DataFrame) else frame_of([(None, list(data))])


def _none(value: Any) -> Any:
    """NaN / NA -> None, numpy scalars -> Python numbers (templates and JSON read plain values)."""
    if value is None or pd.isna(value):
        return None
    return value.item() if hasattr(value, "item") else value


@dataclass(frozen=True)
class CellFrame:
    """One (suite, length, depth) cell of a heatmap."""

    suite: str
    target_tokens: int
    depth_percent: float
    outcomes: dict[Outcome, int]  # every outcome of ALL_OUTCOMES, zero where absent
    recall: float | None = None  # passes / answered (stats.recall_table); None when nothing was answered
    score: float | None = (
        None  # scored suites: mean metric score (stats.score_table); None for pass/miss ones
    )

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
    """One target length: recall of the pass/miss suites' cases there, throughput of every case there."""

    target_tokens: int
    cases: int
    passes: int
    answered: int
    recall: float | None
    ci_low: float | None  # 95% Wilson interval of recall; None when nothing was answered
    ci_high: float | None
    prompt_tokens_p50: float | None  # what the server actually saw (usage, else calibration)
    ttft_p50_s: float | None
    ttft_p95_s: float | None
    prefill_tps_p50: float | None  # prompt tokens / TTFT
    decode_tps_p50: float | None  # measured gaps / their sum (recall_eval.types.Completion)
    timed: int  # answered requests with client timings


@dataclass(frozen=True)
class Summary:
    """The headline numbers of a set of results."""

    cases: int
    passes: int
    answered: int
    recall: float | None
    ci_low: float | None  # None when nothing was answered
    ci_high: float | None
    effective_length: int | None  # over the set as given: pooled when it holds several suites
    threshold: float
    outcomes: dict[Outcome, int] = field(default_factory=dict)  # every outcome, zero where absent
    # per suite: effective length of that suite alone (the figure to quote)
    suite_effective_lengths: dict[str, int | None] = field(default_factory=dict)
    # per suite: (passes, answered, recall) of that suite alone; a pooled recall is quoted beside them
    suite_recalls: dict[str, tuple[int, int, float | None]] = field(default_factory=dict)
    scoring: str = "lenient"  # which verdict the headline figures use (recall_eval.frame.headline_frame)
    other_passes: int | None = None  # passes under the other verdict (strict when the headline is lenient)

    @property
    def other_scoring(self) -> str:
        return "strict" if self.scoring == "lenient" else "lenient"

    @property
    def other_recall(self) -> float | None:
        if self.other_passes is None or not self.answered:
            return None
        return self.other_passes / self.answered

    @property
    def infra(self) -> int:
        return sum(self.outcomes[o] for o in INFRA_OUTCOMES)

    @property
    def not_applicable(self) -> int:
        return self.outcomes.get("not_applicable", 0)

    @property
    def pooled(self) -> bool:
        """True when effective_length pools several suites."""
        return len(self.suite_effective_lengths) > 1


def latest_per_case(results: Iterable[Result]) -> list[Result]:
    """One result per (variant, case id), the last stored one winning, in grid order."""
    latest: dict[tuple[str, str], Result] = {}
    for result in results:
        latest[(result.variant, result.case_id)] = result
    return sorted(latest.values(), key=_case_order)


def _case_order(result: Result) -> tuple[str, int, float, int, str]:
    return (result.suite, result.target_tokens, result.depth_percent, result.trial, result.case_id)


def count_outcomes(data: ResultsLike) -> dict[Outcome, int]:
    counts = as_frame(data)["outcome"].value_counts()
    return {o: int(counts.get(o, 0)) for o in ALL_OUTCOMES}


def pass_miss(frame: pd.DataFrame) -> pd.DataFrame:
    """The rows of pass/miss suites: recall and its effective length are theirs alone; a scored suite's
    rows (a metric grades them) have a mean score instead (recall_eval.stats.score_table)."""
    return frame[frame["metric"].isna()] if "metric" in frame else frame


def recall_by_length(data: ResultsLike) -> dict[int, float | None]:
    """Recall per target length over the pass/miss suites' answered cases; None where a length has no
    answered case. Lengths where every case was not applicable are left out (nothing was measured there)."""
    frame = pass_miss(as_frame(data))
    table = recall_table(frame[~frame["outcome"].isin(NOT_APPLICABLE_OUTCOMES)], ["target_tokens"])
    return {int(length): _none(value) for length, value in table["recall"].items()}


def summarize(data: ResultsLike, threshold: float = EFFECTIVE_RECALL, planned: Iterable[str] = ()) -> Summary:
    """Headline numbers; per-suite effective lengths in the order of suites_in(data, planned). No-context
    baselines are left out (shown in their own sections beside their suites), unless the data holds
    nothing else (a baseline's own section)."""
    frame = as_frame(data)
    headline = without_baselines(frame)
    frame = headline if len(headline) else frame
    overall = recall_table(frame).iloc[0]
    by_suite = {
        suite: effective_length_of(frame[frame["suite"] == suite], threshold)
        for suite in suites_in(frame, planned)
        if (frame["suite"] == suite).any()
    }
    suite_recalls = {}
    for suite in by_suite:
        row = recall_table(frame[frame["suite"] == suite]).iloc[0]
        suite_recalls[suite] = (int(row["passes"]), int(row["answered"]), _none(row["recall"]))
    strict = "headline_scoring" in frame and len(frame) and frame["headline_scoring"].iloc[0] == "strict"
    scoring = "strict" if strict else "lenient"
    other = frame["lenient_passed"] if strict else frame.get("strict_passed")
    other_passes = None
    if other is not None and len(frame) and other[frame["counted"]].notna().all():
        other_passes = int(other[frame["counted"]].astype(bool).sum())
    return Summary(
        cases=int(overall["cases"]),
        passes=int(overall["passes"]),
        answered=int(overall["answered"]),
        recall=_none(overall["recall"]),
        ci_low=_none(overall["ci_low"]),
        ci_high=_none(overall["ci_high"]),
        effective_length=effective_length_of(frame, threshold),
        threshold=threshold,
        outcomes=count_outcomes(frame),
        suite_effective_lengths=by_suite,
        suite_recalls=suite_recalls,
        scoring=scoring,
        other_passes=other_passes,
    )


def suite_grid(
    data: ResultsLike,
    suite: str,
    lengths: Iterable[int] = (),
    depths: Iterable[float] = (),
) -> SuiteGrid:
    """The suite's cells over the union of the planned grid (lengths, depths) and what was stored."""
    frame = as_frame(data)
    mine = frame[frame["suite"] == suite]
    all_lengths = tuple(sorted(set(lengths) | {int(n) for n in mine["target_tokens"]}))
    all_depths = tuple(sorted(set(depths) | {float(d) for d in mine["depth_percent"]}))
    counts = mine.groupby(["target_tokens", "depth_percent", "outcome"]).size()
    stored = counts.unstack("outcome", fill_value=0) if len(counts) else pd.DataFrame()
    recall = recall_table(mine, ["target_tokens", "depth_percent"])["recall"] if len(mine) else pd.Series()
    scored = mine[mine["score"].notna()] if "score" in mine else mine.iloc[0:0]
    scores = score_table(scored, ["target_tokens", "depth_percent"])["score"] if len(scored) else pd.Series()
    rows = []
    for depth in all_depths:
        row: list[CellFrame | None] = []
        for length in all_lengths:
            if (length, depth) not in stored.index:
                row.append(None)
                continue
            here = stored.loc[(length, depth)]
            outcomes = {o: int(here.get(o, 0)) for o in ALL_OUTCOMES}
            score = _none(scores.get((length, depth))) if len(scores) else None
            row.append(CellFrame(suite, length, depth, outcomes, _none(recall.loc[(length, depth)]), score))
        rows.append(tuple(row))
    return SuiteGrid(suite=suite, lengths=all_lengths, depths=all_depths, cells=tuple(rows))


def suites_in(data: ResultsLike, planned: Iterable[str] = ()) -> tuple[str, ...]:
    """Suites to show: the planned ones in their order, then any others found in the results. A planned
    file suite (`ruler-jsonl:PATH`, `jsonl:PATH`: a path) shows under the suite its rows name instead."""
    found = as_frame(data)["suite"].drop_duplicates().tolist()
    return tuple(dict.fromkeys([*(name for name in planned if "/" not in name), *found]))


def length_frames(data: ResultsLike) -> list[LengthFrame]:
    """Per target length: recall with its interval over the pass/miss suites' cases (None at a length
    with none answered: scored suites are not pooled in), and medians of every answered request's timings."""
    frame = as_frame(data)
    if frame.empty:
        return []
    lengths = sorted(set(frame["target_tokens"]))
    recall = recall_table(pass_miss(frame), ["target_tokens"]).reindex(lengths)
    recall[["passes", "answered"]] = recall[["passes", "answered"]].fillna(0)
    grouped = frame.groupby("target_tokens")
    columns = ["prompt_tokens", "ttft_s", "prefill_tps", "decode_tps"]
    medians = grouped[columns].agg(lambda values: percentile(values.astype(float), 50))
    ttft_p95 = grouped["ttft_s"].agg(lambda values: percentile(values, 95))
    timed = grouped["ttft_s"].count()
    cases = grouped.size()
    return [
        LengthFrame(
            target_tokens=int(length),
            cases=int(cases[length]),
            passes=int(row["passes"]),
            answered=int(row["answered"]),
            recall=_none(row["recall"]),
            ci_low=_none(row["ci_low"]),
            ci_high=_none(row["ci_high"]),
            prompt_tokens_p50=_none(medians.at[length, "prompt_tokens"]),
            ttft_p50_s=_none(medians.at[length, "ttft_s"]),
            ttft_p95_s=_none(ttft_p95[length]),
            prefill_tps_p50=_none(medians.at[length, "prefill_tps"]),
            decode_tps_p50=_none(medians.at[length, "decode_tps"]),
            timed=int(timed[length]),
        )
        for length, row in recall.iterrows()
    ]


_GRID_ORDER = ["suite", "target_tokens", "depth_percent", "trial", "case_id"]


def _records(rows: pd.DataFrame) -> list[dict[str, Any]]:
    """Frame rows as plain dicts for templates, `expected` decoded to its list of values."""
    records = []
    for record in rows.to_dict("records"):
        record = {key: _none(value) for key, value in record.items()}
        record["expected"] = json.loads(record["expected"] or "[]")
        records.append(record)
    return records


def _graded(frame: pd.DataFrame) -> pd.Series:
    """Rows a metric graded (a scored suite's answered cases): they have a score, not a pass/miss."""
    if "score" not in frame:
        return pd.Series(False, index=frame.index)
    return frame["score"].notna() & frame["metric"].notna()


def failures(data: ResultsLike) -> list[dict[str, Any]]:
    """Every case that did not pass, in grid order (suite, length, depth, trial), as plain dicts;
    not-applicable cells are not failures (the heatmap shows them as N/A), nor are a scored suite's
    graded answers (their partial credit is in lowest_scores); its unanswered cases still are."""
    frame = as_frame(data)
    failed = frame[~frame["passed"] & ~frame["outcome"].isin(NOT_APPLICABLE_OUTCOMES) & ~_graded(frame)]
    return _records(failed.sort_values(_GRID_ORDER))


def lowest_scores(data: ResultsLike) -> list[dict[str, Any]]:
    """A scored suite's graded cases with a score below 1, lowest first (then grid order), as plain dicts."""
    frame = as_frame(data)
    low = frame[_graded(frame)]
    low = low[low["score"] < 1]
    return _records(low.sort_values(["score", *_GRID_ORDER]))


def strict_misses(data: ResultsLike) -> list[dict[str, Any]]:
    """Cases the lenient verdict passes and the strict one misses (with strict_why as `error`), in grid
    order: the answers that named another value, corrected themselves or echoed the prompt."""
    frame = as_frame(data)
    lenient = frame["lenient_passed"] if "lenient_passed" in frame else frame["passed"]
    strict = frame["strict_passed"].astype("boolean").fillna(True).astype(bool)
    rows = failures(frame[lenient & ~strict].assign(passed=False))
    for row in rows:
        row["outcome"], row["error"] = "miss", row.get("strict_why")
    return rows


def tokenizers_used(data: ResultsLike) -> dict[str, int]:
    """Which tokenizer measured the prompts, with how many cases each (missing -> 'unknown')."""
    counts = as_frame(data)["tokenizer"].fillna("unknown").value_counts()
    return {str(name): int(n) for name, n in sorted(counts.items())}


def off_target(data: ResultsLike) -> list[tuple[str, str]]:
    """(suite, depth and case id; what the server counted) for every case sent more than 1% (>= 8 tokens)
    off its target length, by the server's own count (the runner sets length_off_target)."""
    frame = as_frame(data)
    off = frame[frame["length_off_target"] & frame["length_error_tokens"].notna()]
    return [
        (
            f"{row.suite} · depth {row.depth_percent:g}% · {row.case_id}",
            f"target {row.target_tokens}, server counted {row.server_prompt_tokens} ({row.length_error_tokens:+d})",
        )
        for row in off.itertuples()
    ]
