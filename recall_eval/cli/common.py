"""Small helpers shared by the sweep, compare, serve, report and runs commands."""

from __future__ import annotations

import shlex
import webbrowser
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from recall_eval.types import Result


def resume_command(run_dir: Path) -> str:
    return f"recall-eval sweep --resume {shlex.quote(str(run_dir))}"


def summary_line(results: list[Result], scoring: str = "lenient") -> str:
    """The console summary of results (recall_eval.summary.summary_line over their results frame, with
    `scoring` the headline verdict)."""
    from recall_eval import summary  # pandas and scipy: only once there are results to summarise
    from recall_eval.frame import frame_of, headline_frame

    return summary.summary_line(headline_frame(frame_of([(None, results)]), scoring))


def open_in_browser(path: Path) -> None:
    webbrowser.open(path.resolve().as_uri())
