"""The sweep's rich progress display: calibration, then done/total, passes so far with the recall of
each suite and its 95% Wilson interval (recall_eval.live_recall), ETA, current length."""

from __future__ import annotations

from types import TracebackType

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    SpinnerColumn,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from recall_eval.live_recall import LiveRecall
from recall_eval.types import Case, Result


def progress_display(console: Console) -> Progress:
    """The bars' columns: description, bar, done/total, passes, current length, elapsed, ETA."""
    return Progress(
        SpinnerColumn(),
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[passes]}"),
        TextColumn("{task.fields[length]}"),
        TimeElapsedColumn(),
        TextColumn("ETA"),
        TimeRemainingColumn(),
        console=console,
        transient=False,
    )


class SweepProgress:
    """Two bars on stderr: calibrating cases, then running them. Rich hides itself when not a TTY.

    `shared`: a display already shown (variants running at once), where this sweep's bars are added
    under its `label`."""

    def __init__(
        self,
        console: Console,
        total: int,
        already_done: int = 0,
        already_passed: int = 0,
        shared: Progress | None = None,
        label: str = "",
    ):
        self.progress = shared if shared is not None else progress_display(console)
        self._owned = shared is None
        self.label = label
        self.total = total
        self.passes = already_passed
        self.live = LiveRecall()
        self._calibration: TaskID | None = None
        self._run: TaskID | None = None
        self._already = already_done

    def __enter__(self) -> SweepProgress:
        if self._owned:
            self.progress.__enter__()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        if self._owned:
            self.progress.__exit__(kind, error, trace)

    def log(self, message: str) -> None:
        prefix = f"{self.label}: " if self.label else ""
        self.progress.console.print(prefix + message, highlight=False, markup=False)

    def start_calibration(self, count: int) -> None:
        self._calibration = self.progress.add_task(
            f"calibrating {self.label}".strip(), total=count, passes="", length=""
        )

    def calibrated(self, case: Case) -> None:
        if self._calibration is not None:
            self.progress.update(self._calibration, advance=1, length=f"len {case.target_tokens}")

    def start_run(self) -> None:
        self._run = self.progress.add_task(
            self.label or "sweep",
            total=self.total,
            completed=self._already,
            passes=self._passes_text(),
            length="",
        )

    def _passes_text(self) -> str:
        recall = self.live.text()
        return f"[green]{self.passes} pass[/green]" + (f" · {recall}" if recall else "")

    def started(self, case: Case) -> None:
        if self._run is not None:
            self.progress.update(self._run, length=f"len {case.target_tokens}")

    def finished(self, result: Result) -> None:
        self.passes += result.outcome == "pass"
        self.live.add(result)
        if self._run is not None:
            self.progress.update(self._run, advance=1, passes=self._passes_text())
