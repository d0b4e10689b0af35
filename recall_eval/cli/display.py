"""The CLI's view of the library's hooks: notes and server output on stderr, rich progress bars."""

from __future__ import annotations

from contextlib import AbstractContextManager

from rich.console import Console
from rich.markup import escape

from recall_eval.api import Hooks, RunRecord
from recall_eval.api.hooks import NoteLevel
from recall_eval.cli.common import summary_line
from recall_eval.cli.progress import SweepProgress
from recall_eval.types import Profile


class ConsoleHooks(Hooks):
    """Prints what the library reports. `label_runs`: prefix each run's summary with its variant."""

    def __init__(self, console: Console, label_runs: bool = False):
        self.console = console
        self.label_runs = label_runs

    def note(self, text: str, level: NoteLevel = "info") -> None:
        if level == "warning":
            self.console.print(f"[yellow]note:[/yellow] {escape(text)}", highlight=False, soft_wrap=True)
        else:
            self.console.print(text, highlight=False, markup=False, soft_wrap=True)

    def server_output(self, line: str) -> None:
        self.console.print(f"[dim]{escape(line)}[/dim]", highlight=False, soft_wrap=True)

    def launching(self, profile: Profile) -> AbstractContextManager[object]:
        return self.console.status(f"starting the {profile.name} server ({profile.engine})...")

    def sweep_progress(self, total: int, already_done: int, already_passed: int) -> SweepProgress:
        return SweepProgress(self.console, total, already_done, already_passed)

    def run_done(self, record: RunRecord) -> None:
        summary = summary_line(list(record.results))
        self.console.print(f"{record.variant}: {summary}" if self.label_runs else summary, highlight=False)
