"""What a caller sees while the library works: notes, server output, and sweep progress.

The library calls these and never prints. `Hooks()` logs notes, and a progress line at most every
PROGRESS_EVERY_S seconds, through the `recall_eval` logger; where the program configured no logging at
all, that logger writes its INFO lines to stderr, so a notebook or script is not silent while a server
starts and cases run. The CLI passes its own subclass that draws rich progress bars.
"""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Sequence
from contextlib import AbstractContextManager, nullcontext
from types import TracebackType
from typing import TYPE_CHECKING, Literal, Protocol

from recall_eval.live_recall import LiveRecall
from recall_eval.types import Case, Profile, Result

if TYPE_CHECKING:
    from recall_eval.api.records import RunRecord

log = logging.getLogger("recall_eval")
PROGRESS_EVERY_S = 10.0


def _visible_log() -> None:
    """Give the `recall_eval` logger a stderr handler when nothing in the program configured logging."""
    if log.handlers or logging.getLogger().handlers:
        return
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("recall-eval: %(message)s"))
    log.addHandler(handler)
    if log.level == logging.NOTSET:
        log.setLevel(logging.INFO)


NoteLevel = Literal["info", "warning"]


class SweepProgress(Protocol):
    """Progress of one sweep: calibration, then the cases. A context manager around both."""

    def __enter__(self) -> SweepProgress: ...

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None: ...

    def log(self, message: str) -> None:
        """A line about the sweep (runner events, calibration summary)."""

    def start_calibration(self, count: int) -> None: ...

    def calibrated(self, case: Case) -> None: ...

    def start_run(self) -> None: ...

    def started(self, case: Case) -> None: ...

    def finished(self, result: Result) -> None: ...


class QuietProgress:
    """SweepProgress as log lines (the `recall_eval` logger): the sweep's own lines, when calibration and
    the cases start, and how many cases are done at most every PROGRESS_EVERY_S seconds."""

    def __init__(self, total: int = 0, already_done: int = 0) -> None:
        self.total, self.done, self.passed = total, already_done, 0
        self.live = LiveRecall()
        self._last = time.monotonic()

    def __enter__(self) -> QuietProgress:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def log(self, message: str) -> None:
        log.info(message)

    def start_calibration(self, count: int) -> None:
        log.info("calibrating %d case%s against the server's tokenizer", count, "" if count == 1 else "s")

    def calibrated(self, case: Case) -> None:
        pass

    def start_run(self) -> None:
        log.info("running %d of %d cases", self.total - self.done, self.total)

    def started(self, case: Case) -> None:
        pass

    def finished(self, result: Result) -> None:
        self.done += 1
        self.passed += result.outcome == "pass"
        self.live.add(result)
        now = time.monotonic()
        if now - self._last >= PROGRESS_EVERY_S or self.done == self.total:
            self._last = now
            recall = self.live.text()
            log.info(
                "%d/%d cases done, %d passed%s",
                self.done,
                self.total,
                self.passed,
                f"; {recall}" if recall else "",
            )


class Hooks:
    """Callbacks of sweep/compare/resume. Subclass and override what you want to show."""

    def __init__(self) -> None:
        _visible_log()

    def note(self, text: str, level: NoteLevel = "info") -> None:
        """One line for the user: a run was created or reused, a server is ready, a caveat."""
        log.log(logging.WARNING if level == "warning" else logging.INFO, text)

    def server_output(self, line: str) -> None:
        """A line from the launcher while a server starts (its command, its readiness)."""
        log.info(line)

    def launching(self, profile: Profile) -> AbstractContextManager[object]:
        """Held while the profile's server starts (the CLI shows a spinner)."""
        return nullcontext()

    def interleaving(self, labels: Sequence[str]) -> AbstractContextManager[object]:
        """Held while the variants `labels` run at once, their requests interleaved (a compare on running
        servers); each variant's sweep_progress is asked for inside it, in this order."""
        return nullcontext()

    def sweep_progress(self, total: int, already_done: int, already_passed: int) -> SweepProgress:
        """Progress of one sweep over `total` cases, `already_done` of them stored before (resume)."""
        return QuietProgress(total, already_done)

    def run_done(self, record: RunRecord) -> None:
        """A run finished (its report rendered, when asked for); not called for a reused run."""
        log.info("%s: %s passed of %s answered", record.run_id, record.passes, record.answered)
