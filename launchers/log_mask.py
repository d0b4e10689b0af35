"""The copy from a launched server's output to its log: every line is written with its secrets masked.

A server's output is the server's, but the log file is the run's, and a run never writes a secret:
SGLang prints its whole ServerArgs at start-up (`api_key='...'`), and a wrapper script may echo its
command line. The server's stdout and stderr go into a pipe; a thread of the harness (MaskedLog) reads
it and appends each line to the log masked by recall_eval.redact: by value (the launch's secrets:
values of secret-named flags and environment variables) and by name (`--api-key X`, `api_key='X'`,
`Authorization: Bearer X`). It ends at the end of the pipe, when the server's whole process group has
exited; a death is classified after it has written the server's last words (wait()).

"The server answered" (mark_served) is a position in the log: lines the server printed before it
answered are older than the answer, even when they are still in the pipe. So the mark is taken in pipe
bytes (what the thread has read plus what waits in the pipe, FIONREAD) and becomes a log offset once
the thread has written that far. If the harness dies, so does this thread: the server's next write
fails and the watchdog stops its group anyway.
"""

from __future__ import annotations

import fcntl
import os
import struct
import termios
import threading
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import BinaryIO

from recall_eval.redact import MIN_SECRET_LEN, Redactor, is_secret_name

READ_BYTES = 65_536
MAX_LINE = 64 * 1024  # a longer line (a progress bar without newlines) is written in pieces


def launch_secrets(argv: Sequence[str], env: Mapping[str, str]) -> list[str]:
    """Values of secret-named flags (`--api-key X`, `--api-key=X`) and environment variables."""
    found = [value for name, value in env.items() if is_secret_name(name)]
    for index, arg in enumerate(argv):
        flag, eq, value = arg.partition("=")
        if not arg.startswith("-") or not is_secret_name(flag):
            continue
        if eq:
            found.append(value)
        elif index + 1 < len(argv) and not argv[index + 1].startswith("-"):
            found.append(argv[index + 1])
    return sorted({value for value in found if len(value) >= MIN_SECRET_LEN})


def _unread_bytes(fd: int) -> int:
    try:
        return struct.unpack("i", fcntl.ioctl(fd, termios.FIONREAD, b"\0\0\0\0"))[0]
    except OSError:
        return 0


class MaskedLog:
    """Copies a pipe (the server's output, `fd`, owned and closed here) to `log_path`, masked.
    on_error: told once, in one line, when the log cannot be written."""

    def __init__(
        self, fd: int, log_path: Path, secrets: Sequence[str], on_error: Callable[[str], None] | None = None
    ):
        self.fd = fd
        self.on_error = on_error or (lambda line: None)
        self.log_path = log_path
        self.redactor = Redactor(secrets)
        self.read = 0  # pipe bytes read
        self.written = 0  # pipe bytes whose lines are in the log
        self.mark_at: int | None = None  # pipe position of the latest "served" mark not yet written
        self.marked_offset: int | None = None  # log offset of the latest mark once written
        self.thread = threading.Thread(target=self._copy, name=f"log:{log_path.name}", daemon=True)
        self.thread.start()

    def mark_served(self) -> int | None:
        """Mark "the server answered now"; returns the log offset at once when everything the server
        printed before is already written, else None (served_offset() has it once written)."""
        target = self.read + _unread_bytes(self.fd)  # read first: a race can only include older lines
        if self.written >= target:
            self.mark_at = None
            self.marked_offset = _size(self.log_path)
            return self.marked_offset
        self.mark_at = target
        return None

    def served_offset(self) -> int | None:
        return self.marked_offset

    def wait(self, timeout_s: float = 5.0) -> None:
        """Until the pipe has ended and everything is written (a server's child may hold it longer)."""
        self.thread.join(timeout_s)

    def _copy(self) -> None:
        """Copy until the pipe ends. A log that cannot be written (a full disk, its directory removed)
        is said once; the pipe is still drained to its end, never closed early: a server whose output
        pipe closes dies of SIGPIPE at its next line."""
        try:
            try:
                with open(self.log_path, "ab") as log:
                    self._copy_to(log)
                return
            except OSError as err:
                self.on_error(
                    f"cannot write the server's log {self.log_path} ({err.strerror or err}); its output "
                    "is discarded from here on, the server keeps running"
                )
            while chunk := os.read(self.fd, READ_BYTES):
                self.read += len(chunk)
                self.written = self.read
        except OSError:
            pass  # the pipe itself failed: nothing more will come
        finally:
            os.close(self.fd)

    def _copy_to(self, log: BinaryIO) -> None:
        pending = b""
        while chunk := os.read(self.fd, READ_BYTES):
            self.read += len(chunk)
            lines = (pending + chunk).split(b"\n")
            pending = lines.pop()
            if len(pending) > MAX_LINE:
                lines.append(pending)
                pending = b""
            position = self.written
            for line in lines:
                log.write((self.redactor.text(line.decode("utf-8", "replace")) + "\n").encode("utf-8"))
                position += len(line) + 1
                mark = self.mark_at
                if mark is not None and position >= mark:  # the answer came after this line
                    log.flush()
                    self.mark_at, self.marked_offset = None, log.tell()
            log.flush()
            self.written = position
            self._passed_mark(log)  # a mark taken while this chunk was being written
        if pending:
            log.write(self.redactor.text(pending.decode("utf-8", "replace")).encode("utf-8"))
            log.flush()
        self.written = self.read
        self._passed_mark(log)

    def _passed_mark(self, log: BinaryIO) -> None:
        mark = self.mark_at
        if mark is not None and self.written >= mark:
            self.mark_at = None
            self.marked_offset = log.tell()


def _size(path: Path) -> int | None:
    try:
        return os.path.getsize(path)
    except OSError:
        return None
