"""The one-paragraph conclusion at the top of a compare report, generated from the frames' numbers.

(compare.json stores it under "verdict", the page shows it as #verdict: names kept for stored files and
links; the exit code of a compare is recall_eval.exit_codes, a different thing.)

Per variant B against the baseline A: the direction of the recall change only when the exact McNemar
test on identical cases is significant (p < SIGNIFICANCE), where it happens (the lengths at which more
cases flip miss->pass than pass->miss), the flip counts and p-value; then effective length, throughput
medians (each with a bootstrap interval of the per-case change; an exact sign test only when the runs were
interleaved on live servers, since runs made one after the other are not exchangeable) and the memory plan
where they differ; then the pairs the test had to leave out. Plain text: the
template escapes it.
"""

from __future__ import annotations

from recall_eval.formatting import p_value, share, signed_percent
from recall_eval.stats import SIGNIFICANCE, PairedTest
from recall_eval.types import INFRA_OUTCOMES
from reports.compare_frames import METRICS, CompareFrames, PairFrame, VariantFrame

METRIC_WORDS = {"ttft_s": "TTFT", "prefill_tps": "prefill speed", "decode_tps": "decode speed"}


def format_length(length: int | None) -> str:
    return "none" if length is None else f"{length:,}"


def _flips(test: PairedTest) -> str:
    noun = "case flips" if test.gained == 1 else "cases flip"
    return f"{test.gained} {noun} miss→pass, {test.lost} pass→miss, {p_value(test.p_value)}"


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
    rates = f"recall {share(pair.a.summary.recall)} → {share(pair.b.summary.recall)}"
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


def _infra_of(frame: VariantFrame) -> str:
    parts = [f"{frame.summary.outcomes[o]} {o}" for o in INFRA_OUTCOMES if frame.summary.outcomes.get(o)]
    return ", ".join(parts) if parts else "none"


def _details(pair: PairFrame) -> list[str]:
    details: list[str] = []
    a, b = pair.a, pair.b
    if a.effective_length != b.effective_length:
        details.append(
            f"effective length {format_length(a.effective_length)} → {format_length(b.effective_length)} tokens"
        )
    speeds = []
    for name, _, _ in METRICS:
        change = pair.throughput_change.get(name)
        if change is None:
            continue
        text = f"{METRIC_WORDS[name]} {signed_percent(change)}"
        case = pair.speed_changes.get(name)
        notes = []
        if case is not None and case.ci_low_pct is not None and case.ci_high_pct is not None:
            if case.ci_low_pct == case.ci_high_pct:
                notes.append(f"{signed_percent(case.ci_low_pct)} on every timed case")
            else:
                low, high = signed_percent(case.ci_low_pct), signed_percent(case.ci_high_pct)
                notes.append(f"per-case median 95% CI {low} to {high}")
        if case is not None and case.p_value is not None:
            significant = "" if case.p_value < SIGNIFICANCE else "not significant, "
            notes.append(f"{significant}sign test {p_value(case.p_value)}")
        if notes:
            text += f" ({'; '.join(notes)})"
        speeds.append(text)
    if speeds:
        order = (
            "interleaved runs" if pair.interleaved else "runs made one after the other: drift not excluded"
        )
        details.append("median " + ", ".join(speeds) + f" [{order}]")
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


def pair_conclusion(pair: PairFrame) -> str:
    details = _details(pair)
    return _recall_sentence(pair) + ("; " + "; ".join(details) if details else "") + "."


def conclusion(frames: CompareFrames) -> str:
    """One paragraph: one sentence per variant against the first."""
    return " ".join(pair_conclusion(pair) for pair in frames.pairs)
