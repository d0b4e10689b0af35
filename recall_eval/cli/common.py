"""Small helpers shared by the sweep, compare, serve, report and runs commands."""

from __future__ import annotations

import os
import shlex
import sys
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
    """Open the report in the user's browser; where none can be opened (no display: a server over
    SSH, a container) one line says so and where the file is, instead of nothing."""
    from recall_eval.cli.app import say

    uri = path.resolve().as_uri()
    no_display = sys.platform.startswith("linux") and not (
        os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY") or os.environ.get("BROWSER")
    )
    if no_display or not webbrowser.open(uri):
        why = "no display here ($DISPLAY is not set)" if no_display else "no browser could be started"
        say(
            f"--open: {why}; open {uri} in a browser (or copy {path} to a machine with one)",
            "note:",
            "yellow",
        )
