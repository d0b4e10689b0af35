"""The one-line console summary of a set of results, from the results frame (same figures as the report)."""

from __future__ import annotations

import pandas as pd

from recall_eval.stats import effective_length, recall_table
from recall_eval.types import INFRA_OUTCOMES, RECALL_OUTCOMES


def _percent(value: float) -> str:
    return f"{100 * value:.1f}%"


def effective_lengths(frame: pd.DataFrame) -> dict[str, int | None]:
    """Effective length of each suite on its own (stats.effective_length over its recall by length)."""
    return {
        str(suite): effective_length(recall_table(part, ["target_tokens"])["recall"])
        for suite, part in frame.groupby("suite", sort=False)
    }


def summary_line(frame: pd.DataFrame) -> str:
    """e.g. 'recall 95.0% (76/80 answered; Wilson 87.8%-98.0%) · effective length needle 8,000 ·
    pass 76, miss 4 · too_long 2'."""
    overall = recall_table(frame).iloc[0]
    passes, answered = int(overall["passes"]), int(overall["answered"])
    if answered:
        head = (
            f"recall {_percent(overall['recall'])} ({passes}/{answered} answered; "
            f"Wilson {_percent(overall['ci_low'])}-{_percent(overall['ci_high'])})"
        )
    else:
        head = "recall n/a (no answer from a live model)"
    lengths = ", ".join(
        f"{suite} {'none' if value is None else f'{value:,}'}"
        for suite, value in effective_lengths(frame).items()
    )
    counts = frame["outcome"].value_counts()
    live = ", ".join(f"{name} {counts[name]}" for name in RECALL_OUTCOMES if counts.get(name, 0))
    infra = ", ".join(f"{name} {counts[name]}" for name in INFRA_OUTCOMES if counts.get(name, 0))
    parts = (head, f"effective length {lengths}" if answered and lengths else "", live, infra)
    return " · ".join(part for part in parts if part)
