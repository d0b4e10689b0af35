"""How numbers read to a user, defined once for the console and the reports (jinja filters included):
percentages, token counts, seconds, rates, p-values, times. A value that is absent reads as MISSING."""

from __future__ import annotations

import json
import math
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from recall_eval.types import RequestSettings, request_knobs

if TYPE_CHECKING:  # only a type here: the CLI imports this module before pandas is needed
    import pandas as pd

if TYPE_CHECKING:
    from recall_eval.stats import ScoredPairedTest
MISSING = "–"


def percent(value: float | None, digits: int = 1) -> str:
    """0.988 -> '98.8%'."""
    return MISSING if value is None else f"{100 * value:.{digits}f}%"


def signed_percent(value: float) -> str:
    """A change in percent: 12.34 -> '+12.3%'."""
    return f"{value:+.1f}%"


def share(value: float | None) -> str:
    """A rate in whole percent, 'n/a' when there is none: 0.95 -> '95%'."""
    return "n/a" if value is None else f"{value:.0%}"


def tokens(value: float | None) -> str:
    """A token count with thousands separators: 22597 -> '22,597'."""
    return MISSING if value is None else f"{round(value):,}"


def seconds(value: float | None) -> str:
    """0.0123 -> '12 ms', 2.5 -> '2.50 s'."""
    if value is None:
        return MISSING
    return f"{value * 1000:.0f} ms" if value < 1 else f"{value:.2f} s"


def rate(value: float | None) -> str:
    """Tokens per second: 1234.56 -> '1,234.6'."""
    return MISSING if value is None else f"{value:,.1f}"


def utc(timestamp: float | None) -> str:
    if timestamp is None:
        return MISSING
    return datetime.fromtimestamp(timestamp, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def recall_text(row: pd.Series) -> str:
    """A row of stats.recall_table as the report states it: '98.8% (Wilson 93.3%-99.8%)'.

    With nothing answered by a live model there is no recall to state: 'n/a (nothing answered)'.
    """
    if not row["answered"] or math.isnan(row["recall"]):
        return "n/a (nothing answered)"
    return f"{percent(row['recall'])} (Wilson {percent(row['ci_low'])}-{percent(row['ci_high'])})"


def format_p(p_value: float) -> str:
    """A p-value as reports and the console print it: 'p < 0.001', 'p = 0.062'."""
    return "p < 0.001" if p_value < 0.001 else f"p = {p_value:.2g}"


def score_points(value: float | None, signed: bool = False) -> str:
    """A score in [0, 1] on RULER's 0-100 scale: '62.5'; a difference '+12.5'; None -> 'n/a'."""
    if value is None:
        return "n/a"
    return f"{100 * value:+.1f}" if signed else f"{100 * value:.1f}"


def score_change_text(test: ScoredPairedTest) -> str:
    """A scored suite's paired comparison (recall_eval.stats.ScoredPairedTest), e.g. 'mean score 62.5 ->
    48.0 (-14.5, 95% CI -22.0 to -7.0), 2 higher / 11 lower of 16 paired cases, Wilcoxon signed-rank
    p = 0.004 (n = 13)'."""
    if test.paired == 0:
        return "no scored case was answered under both"
    change = score_points(test.mean_diff, signed=True)
    if test.ci_low is not None and test.ci_high is not None and test.ci_low != test.ci_high:
        change += f", 95% CI {score_points(test.ci_low, True)} to {score_points(test.ci_high, True)}"
    return (
        f"mean score {score_points(test.mean_a)} → {score_points(test.mean_b)} ({change}), "
        f"{test.higher} higher / {test.lower} lower of {test.paired:,} paired cases, "
        f"Wilcoxon signed-rank {format_p(test.p_value)} (n = {test.changed})"
    )


def settings_text(settings: RequestSettings) -> str | None:
    """The request settings that change verdicts and are not their defaults, by their labels, for the
    console ('request settings: reasoning effort high, stop ["\\n\\n"]'); None when all are defaults."""
    defaults = RequestSettings()
    shown = [
        f"{knob.label} {value if isinstance(value, str) else json.dumps(value, sort_keys=True)}"
        for name, knob in request_knobs().items()
        if knob.verdicts and (value := getattr(settings, name)) != getattr(defaults, name)
    ]
    return "request settings: " + ", ".join(shown) if shown else None
