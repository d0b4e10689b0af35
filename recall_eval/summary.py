"""The one-line console summary of a set of results, from the results frame (same figures as the report)."""

from __future__ import annotations

import pandas as pd

from recall_eval.formatting import percent, recall_text
from recall_eval.frame import without_baselines
from recall_eval.scoring import budget_eaten_by_reasoning
from recall_eval.stats import effective_length_of, recall_table, score_table
from recall_eval.types import INFRA_OUTCOMES, RECALL_OUTCOMES, is_baseline


def effective_lengths(frame: pd.DataFrame) -> dict[str, int | None]:
    """Effective length of each suite on its own (stats.effective_length_of), suites in frame order."""
    return {str(suite): effective_length_of(part) for suite, part in frame.groupby("suite", sort=False)}


def summary_line(frame: pd.DataFrame) -> str:
    """e.g. 'recall 95.0% (Wilson 87.8%-98.0%), 76 passed of 80 answered, strict 93.8% · effective length
    needle 8,000 · pass 76, miss 4 · too_long 2'. Over several pass/miss suites the recall says `pooled` and
    each suite's own follows it; scored suites (recall_eval.metrics) give a score instead. A no-context
    baseline (needle~nocontext) is in none of these: its own figure follows, marked `baseline`."""
    outcomes = frame
    baselines = _baselines_text(frame)
    frame = without_baselines(frame)
    scored = frame["metric"].notna() if "metric" in frame else pd.Series(False, index=frame.index)
    score_head = _score_text(frame[scored]) if scored.any() else ""
    if scored.all() and score_head:  # only scored suites: no recall to state (recall is for pass/miss suites)
        return " · ".join(part for part in (score_head, baselines, _counts_text(outcomes)) if part)
    frame = frame[~scored]
    overall = recall_table(frame).iloc[0]
    passes, answered = int(overall["passes"]), int(overall["answered"])
    suites = list(dict.fromkeys(frame["suite"]))
    pooled = len(suites) > 1
    if answered and budget_eaten_by_reasoning(frame):
        head, lengths = "recall not measured (every answer cut inside its reasoning: raise --max-tokens)", ""
    elif answered:
        head = f"recall {'pooled ' if pooled else ''}{recall_text(overall)}, {passes} passed of {answered} answered"
        other = _other_verdict(frame)
        if other:
            head += f", {other}"
        if pooled:
            by_suite = recall_table(frame, ["suite"])
            head += " · " + ", ".join(
                f"{suite} {percent(by_suite.at[suite, 'recall'] if by_suite.at[suite, 'answered'] else None)}"
                for suite in suites
            )
        lengths = ", ".join(
            f"{suite} {'none' if value is None else f'{value:,}'}"
            for suite, value in effective_lengths(frame).items()
        )
    else:
        head, lengths = "recall n/a (no answer from a live model)", ""
    if not len(frame) and baselines:  # baselines only: their figures are the whole story
        head = ""
    parts = (
        head,
        f"effective length {lengths}" if lengths else "",
        score_head,
        baselines,
        _counts_text(outcomes),
    )
    return " · ".join(part for part in parts if part)


def _baselines_text(frame: pd.DataFrame) -> str:
    """'baseline needle~nocontext 0.0%, niah_single_1~nocontext score 0.0': each no-context baseline's own
    recall (pass/miss) or mean score, never pooled with its suite."""
    parts = []
    for suite, part in frame[frame["suite"].map(is_baseline).astype(bool)].groupby("suite", sort=False):
        if part["metric"].notna().any():
            table = score_table(part).iloc[0]
            value = f"score {100 * table['score']:.1f}" if table["answered"] else "score n/a"
        else:
            table = recall_table(part).iloc[0]
            value = percent(table["recall"] if table["answered"] else None)
        parts.append(f"{suite} {value}")
    return f"baseline {', '.join(parts)}" if parts else ""


def _score_text(scored: pd.DataFrame) -> str:
    """'score 41.3 (mean x 100 of 22 answered; by task in the report)' for the scored suites' rows."""
    table = score_table(scored).iloc[0]
    if not table["answered"]:
        return "score n/a (no answer from a live model)"
    return f"score {100 * table['score']:.1f} (mean x 100 of {int(table['answered'])} answered; by task in the report)"


def _counts_text(frame: pd.DataFrame) -> str:
    counts = frame["outcome"].value_counts()
    live = ", ".join(f"{name} {counts[name]}" for name in RECALL_OUTCOMES if counts.get(name, 0))
    infra = ", ".join(f"{name} {counts[name]}" for name in INFRA_OUTCOMES if counts.get(name, 0))
    unfit = f"not applicable {counts['not_applicable']}" if counts.get("not_applicable", 0) else ""
    return " · ".join(part for part in (live, infra, unfit) if part)


def _other_verdict(frame: pd.DataFrame) -> str:
    """'strict 93.8%' (or 'lenient ...' under a strict headline); '' when results predate strict scoring."""
    strict = "headline_scoring" in frame and frame["headline_scoring"].iloc[0] == "strict"
    name, column = ("lenient", "lenient_passed") if strict else ("strict", "strict_passed")
    if column not in frame:
        return ""
    counted = frame[frame["counted"]]
    if not len(counted) or counted[column].isna().any():
        return ""
    return f"{name} {percent(counted[column].astype(bool).mean())}"
