"""How numbers read to a user, defined once for the console and the reports."""

from __future__ import annotations

from recall_eval.stats import wilson_interval


def percent(value: float | None, digits: int = 1) -> str:
    """0.988 -> '98.8%'; None -> '-'."""
    return "-" if value is None else f"{100 * value:.{digits}f}%"


def recall_text(passes: int, answered: int) -> str:
    """Recall with its 95% Wilson interval, as the report states it: '98.8% (Wilson 93.3%-99.8%)'.

    With nothing answered by a live model there is no recall to state: 'n/a (nothing answered)'.
    """
    if answered == 0:
        return "n/a (nothing answered)"
    low, high = wilson_interval(passes, answered)
    return f"{percent(passes / answered)} (Wilson {percent(low)}-{percent(high)})"
