"""The one-paragraph conclusion at the top of a compare report, generated from the frames' numbers.

(compare.json stores it under "verdict", the page shows it as #verdict: names kept for stored files and
links; the exit code of a compare is recall_eval.exit_codes, a different thing.)

Per variant B against the baseline A: the direction of the recall change only when the exact McNemar
test on identical cases is significant (p < SIGNIFICANCE), where it happens (the lengths at which more
cases flip miss->pass than pass->miss), the flip counts and p-value; then effective length, throughput
changes as one statistic each (the per-case median change with its bootstrap interval); a speed
difference is claimed, with an exact sign test, only for runs interleaved on live servers; sequential runs
(not exchangeable: the machine drifts) are described with how far apart they ran; a reused run's age;
the memory plan where it differs; then the pairs the test had to leave out. Scored suites get their own
sentence: the mean score difference with its t interval and the Wilcoxon signed-rank test. Plain text: the
template escapes it.
"""

from __future__ import annotations

from recall_eval.formatting import format_p, score_change_text, share, signed_percent
from recall_eval.stats import SIGNIFICANCE, PairedTest
from recall_eval.types import INFRA_OUTCOMES
from reports.compare_frames import METRICS, CompareFrames, PairFrame, SpeedChange, VariantFrame

METRIC_WORDS = {"ttft_s": "TTFT", "prefill_tps": "prefill speed", "decode_tps": "decode speed"}


def format_length(length: int | None) -> str:
    return "none" if length is None else f"{length:,}"


def _flips(test: PairedTest) -> str:
    noun = "case flips" if test.gained == 1 else "cases flip"
    return f"{test.gained} {noun} miss→pass, {test.lost} pass→miss, {format_p(test.p_value)}"


def _where(pair: PairFrame, gaining: bool) -> str:
    """Lengths at which the net flips go the conclusion's way: 'from N tokens up', 'at every length', or a list."""
    lengths = list(pair.by_length)
    chosen = [
        length
        for length, test in pair.by_length.items()
        if (test.gained > test.lost if gaining else test.lost > test.gained)
    ]
    if not chosen:
        return ""
    if chosen == lengths:
        return " at every length"
    if chosen == lengths[lengths.index(chosen[0]) :]:
        return f" from {chosen[0]:,} tokens up"
    if len(chosen) == 1:
        return f" at {chosen[0]:,} tokens"
    return f" at {', '.join(f'{n:,}' for n in chosen[:-1])} and {chosen[-1]:,} tokens"


def _recall_sentence(pair: PairFrame) -> str:
    a, b, test = pair.a.label, pair.b.label, pair.overall
    pooled = " pooled over suites" if pair.a.recall_summary.pooled else ""
    rates = f"recall{pooled} {share(pair.a.recall_summary.recall)} → {share(pair.b.recall_summary.recall)}"
    if test.paired == 0:
        return f"{b} vs {a}: no case was answered by both servers, so recall cannot be compared"
    if test.p_value < SIGNIFICANCE and test.gained != test.lost:
        gaining = test.gained > test.lost
        verb = "raises recall over" if gaining else "loses recall against"
        return f"{b} {verb} {a}{_where(pair, gaining)}: {_flips(test)} ({rates})"
    if test.gained == 0 and test.lost == 0:
        return f"{b} and {a} agree on all {test.paired:,} paired cases ({rates})"
    return (
        f"No significant recall difference between {b} and {a}: {_flips(test)} "
        f"(exact McNemar on {test.paired:,} paired cases; {rates})"
    )


def _effective_lengths(a: VariantFrame, b: VariantFrame) -> str:
    """'effective length 8,000 → 4,000 tokens'; over several suites each suite's own that changed
    ('effective length needle 8,000 → 4,000, config 2,000 → none tokens'), never the pooled figure as if
    it were one suite's."""
    own_a, own_b = a.recall_summary.suite_effective_lengths, b.recall_summary.suite_effective_lengths
    if not (a.recall_summary.pooled or b.recall_summary.pooled):
        if a.effective_length == b.effective_length:
            return ""
        return f"effective length {format_length(a.effective_length)} → {format_length(b.effective_length)} tokens"
    changed = [
        f"{suite} {format_length(own_a.get(suite))} → {format_length(own_b.get(suite))}"
        for suite in dict.fromkeys([*own_a, *own_b])
        if own_a.get(suite) != own_b.get(suite)
    ]
    return f"effective length {', '.join(changed)} tokens" if changed else ""


def _infra_of(frame: VariantFrame) -> str:
    parts = [f"{frame.summary.outcomes[o]} {o}" for o in INFRA_OUTCOMES if frame.summary.outcomes.get(o)]
    return ", ".join(parts) if parts else "none"


def _details(pair: PairFrame) -> list[str]:
    details: list[str] = []
    a, b = pair.a, pair.b
    lengths = _effective_lengths(a, b)
    if lengths:
        details.append(lengths)
    speeds = _speed_clause(pair)
    if speeds:
        details.append(speeds)
    for side in (a, b):
        if side.reused:
            details.append(f"{side.label}: {reused_age(side.reused_age_s)}")
    if a.memory.max_total_num_tokens and b.memory.max_total_num_tokens:
        slots = (
            b.memory.max_total_num_tokens - a.memory.max_total_num_tokens
        ) / a.memory.max_total_num_tokens
        if slots:
            details.append(f"KV slots {signed_percent(slots * 100)}")
    test = pair.overall
    if test.excluded_infra:
        details.append(
            f"{test.excluded_infra:,} {'pair' if test.excluded_infra == 1 else 'pairs'} left out of the test "
            "for infrastructure outcomes "
            f"({a.label}: {_infra_of(a)}; {b.label}: {_infra_of(b)})"
        )
    if test.unpaired:
        noun = "case was" if test.unpaired == 1 else "cases were"
        details.append(f"{test.unpaired:,} {noun} stored under only one of the two runs")
    return details


def minutes_text(minutes: float | None) -> str:
    if minutes is None:
        return "an unknown time"
    return "under 1 min" if minutes < 1 else f"{minutes:.0f} min"


def reused_age(age_s: float | None) -> str:
    """How old a reused run is: 'run reused from 8 min before this compare'."""
    if age_s is None:
        return "run reused from an earlier compare or sweep"
    return f"run reused, finished {minutes_text(age_s / 60)} before this compare"


def _case_median(case: SpeedChange) -> str:
    """One statistic: the per-case median relative change, with its interval."""
    if case.median_change_pct is None:
        return ""
    text = signed_percent(case.median_change_pct)
    if case.ci_low_pct is not None and case.ci_high_pct is not None:
        if case.ci_low_pct == case.ci_high_pct:
            return text + " (the same on every timed case)"
        text += f" (95% CI {signed_percent(case.ci_low_pct)} to {signed_percent(case.ci_high_pct)})"
    return text


def _speed_clause(pair: PairFrame) -> str:
    """Speeds as one statistic each (the per-case median change over identical cases, never mixed with
    the change of the medians). Interleaved runs: a speed difference with its sign test. Sequential
    runs: described, with how far apart they ran, never claimed."""
    parts = []
    for name, _, _ in METRICS:
        case = pair.speed_changes.get(name)
        if case is None or not (text := _case_median(case)):
            continue
        if pair.interleaved and case.p_value is not None:
            significant = "" if case.p_value < SIGNIFICANCE else "not significant, "
            text += f", {significant}sign test {format_p(case.p_value)}"
        parts.append(f"{METRIC_WORDS[name]} {text}")
    if not parts:
        return ""
    if pair.interleaved:
        return "interleaved runs, per-case median change: " + ", ".join(parts)
    if pair.placement == "shared node":
        return (
            "runs at the same time with servers sharing a Ray node (each slowed the other): not a controlled "
            f"speed comparison; per-case median difference: {', '.join(parts)}"
        )
    if pair.placement == "same time":
        return (
            "runs at the same time on different Ray nodes: not a controlled speed comparison; "
            f"per-case median difference: {', '.join(parts)}"
        )
    return (
        f"sequential runs, {minutes_text(pair.minutes_apart)} apart: not a controlled speed comparison; "
        f"per-case median difference: {', '.join(parts)}"
    )


def _score_sentence(pair: PairFrame) -> str:
    """Scored suites: the mean score difference and the Wilcoxon signed-rank test on identical cases."""
    a, b, test = pair.a.label, pair.b.label, pair.scored_overall
    if test is None:
        return ""
    where = "the scored suites" if len(pair.scored_by_suite) > 1 else next(iter(pair.scored_by_suite), "")
    if test.lower_at(SIGNIFICANCE) or test.higher_at(SIGNIFICANCE):
        verb = "scores lower than" if test.lower_at(SIGNIFICANCE) else "scores higher than"
        head = f"{b} {verb} {a} on {where}"
    else:
        head = f"No significant score difference between {b} and {a} on {where}"
    moved = [
        suite
        for suite, t in pair.scored_by_suite.items()
        if len(pair.scored_by_suite) > 1 and (t.lower_at(SIGNIFICANCE) or t.higher_at(SIGNIFICANCE))
    ]
    suites = f" (significant on {', '.join(moved)})" if moved else ""
    return f"{head}: {score_change_text(test)}{suites}"


def pair_conclusion(pair: PairFrame) -> str:
    details = _details(pair)
    sentences = [_recall_sentence(pair)] if pair.by_suite or pair.scored_overall is None else []
    if pair.scored_overall is not None:
        sentences.append(_score_sentence(pair))
    return "; ".join(sentences) + ("; " + "; ".join(details) if details else "") + "."


def conclusion(frames: CompareFrames) -> str:
    """One paragraph: one sentence per variant against the first."""
    return " ".join(pair_conclusion(pair) for pair in frames.pairs)
