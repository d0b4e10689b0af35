"""The thread that appends a run's results to results.jsonl, so the event loop never waits on a
write or an fsync (the timings of the requests in flight stay true).

The loop hands a result over and goes on; nothing wakes it back. A case counts as done for resume
once its line is on disk, so a result handed over but not yet written when the harness dies is a case
in flight: it runs again on resume, never twice. A write that fails (a full disk) stops the writer;
the error is raised at the next hand-over, or returned by close(), which waits for every line
handed over.
"""

from __future__ import annotations

import queue
import threading

from recall_eval.store import RunStore
from recall_eval.types import Result

_STOP = object()


class ResultsWriter:
    def __init__(self, store: RunStore):
        self.store = store
        self.lines: queue.SimpleQueue[object] = queue.SimpleQueue()
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._write, name="results-writer", daemon=True)
        self.thread.start()

    def put(self, result: Result) -> None:
        if self.error is not None:
            raise self.error
        self.lines.put(result)

    def close(self) -> BaseException | None:
        """Wait until every result handed over is on disk; the write error, if one stopped the writer."""
        self.lines.put(_STOP)
        self.thread.join()
        return self.error

    def _write(self) -> None:
        appender = None
        try:
            while (result := self.lines.get()) is not _STOP:
                if self.error is not None:
                    continue  # keep draining until close(), which raises the error
                try:
                    appender = appender or self.store.appender()
                    appender.append(result)  # type: ignore[arg-type]
                except BaseException as err:  # noqa: BLE001 - raised on the loop's side
                    self.error = err
        finally:
            if appender is not None:
                appender.close()
