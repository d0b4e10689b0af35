"""How numbers read to a user, defined once for the console and the reports."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # only a type here: the CLI imports this module before pandas is needed
    import pandas as pd


def percent(value: float | None, digits: int = 1) -> str:
    """0.988 -> '98.8%'; None -> '-'."""
    return "-" if value is None else f"{100 * value:.{digits}f}%"


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
