"""Small helpers shared by the sweep, compare, serve, report and runs commands."""

from __future__ import annotations

import shlex
import webbrowser
from collections import Counter
from collections.abc import Iterable
from pathlib import Path

from recall_eval.formatting import recall_text
from recall_eval.stats import recall_counts
from recall_eval.types import INFRA_OUTCOMES, RECALL_OUTCOMES, Result


def resume_command(run_dir: Path) -> str:
    return f"recall-eval sweep --resume {shlex.quote(str(run_dir))}"


def outcome_counts(results: Iterable[Result]) -> Counter[str]:
    return Counter(result.outcome for result in results)


def summary_line(results: list[Result]) -> str:
    """e.g. 'recall 95.0% (Wilson 87.8%-98.0%), 76/80 answered · pass 76, miss 4 · too_long 2'."""
    passes, answered = recall_counts(results)
    counts = outcome_counts(results)
    if answered:
        head = f"recall {recall_text(passes, answered)}, {passes}/{answered} answered"
    else:
        head = "recall n/a (no answer from a live model)"
    live = ", ".join(f"{name} {counts[name]}" for name in RECALL_OUTCOMES if counts[name])
    infra = ", ".join(f"{name} {counts[name]}" for name in INFRA_OUTCOMES if counts[name])
    unfit = f"not applicable {counts['not_applicable']}" if counts["not_applicable"] else ""
    return " · ".join(part for part in (head, live, infra, unfit) if part)


def render_report(run_dir: Path) -> Path:
    import reports

    return reports.render_report(run_dir)


def open_in_browser(path: Path) -> None:
    webbrowser.open(path.resolve().as_uri())
