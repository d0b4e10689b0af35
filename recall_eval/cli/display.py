"""The CLI's view of the library's hooks: notes and server output on stderr, rich progress bars."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager

from rich.console import Console
from rich.progress import Progress
from rich.text import Text

from recall_eval.api import Hooks, RunRecord
from recall_eval.api.hooks import NoteLevel
from recall_eval.cli.common import summary_line
from recall_eval.cli.progress import SweepProgress, progress_display
from recall_eval.types import Profile


class ConsoleHooks(Hooks):
    """Prints what the library reports. `label_runs`: prefix each run's summary with its variant."""

    def __init__(self, console: Console, label_runs: bool = False):
        self.console = console
        self.label_runs = label_runs
        self._shared: tuple[Progress, Iterator[str]] | None = None  # one display while variants interleave

    def note(self, text: str, level: NoteLevel = "info") -> None:
        if level == "warning":
            self.console.print(Text.assemble(("note:", "yellow"), " ", text), highlight=False, soft_wrap=True)
        else:
            self.console.print(text, highlight=False, markup=False, soft_wrap=True)

    def server_output(self, line: str) -> None:
        self.console.print(Text(line, style="dim"), highlight=False, soft_wrap=True)

    def launching(self, profile: Profile) -> AbstractContextManager[object]:
        return self.console.status(f"starting the {profile.name} server ({profile.engine})...")

    @contextmanager
    def interleaving(self, labels: Sequence[str]) -> Iterator[None]:
        display = progress_display(self.console)  # rich shows one live display at a time
        self._shared = (display, iter(labels))
        try:
            with display:
                yield
        finally:
            self._shared = None

    def sweep_progress(self, total: int, already_done: int, already_passed: int) -> SweepProgress:
        if self._shared is None:
            return SweepProgress(self.console, total, already_done, already_passed)
        display, labels = self._shared
        return SweepProgress(
            self.console, total, already_done, already_passed, shared=display, label=next(labels, "")
        )

    def run_done(self, record: RunRecord) -> None:
        summary = summary_line(list(record.results), record.run.scoring)
        line = f"{record.variant}: {summary}" if self.label_runs else summary
        self.console.print(line, highlight=False, markup=False, soft_wrap=True)
