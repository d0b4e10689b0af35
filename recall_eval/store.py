"""The run directory: run.json (atomic), results.jsonl (append + fsync per case), server logs, report.

Layout (DESIGN.md):
    runs/<run-id>/run.json        the Run, rewritten atomically (tmp + fsync + rename)
    runs/<run-id>/results.jsonl   one Result per line, appended and fsynced as each case finishes
                                  (a case retried with --retry has a line per attempt; the last counts)
    runs/<run-id>/server-*.log    the launched server's output
    runs/<run-id>/report.html     rendered from the above

A crash can leave at most one torn (partial) last line in results.jsonl, without its newline; readers
skip it and the next append first sets it aside (results.jsonl.torn) and cuts it off. A whole line that
does not read as a Result is never cut: it is kept, not counted, and reported (RunStore.unreadable).
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
import time
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from pydantic import BaseModel, ValidationError

from recall_eval.errors import BadInput, UserError
from recall_eval.migrations import NewerFormat, migrate_run
from recall_eval.redact import Redactor, redact_result, redact_run
from recall_eval.types import Result, Run, RunSpec

RUN_FILE = "run.json"
RESULTS_FILE = "results.jsonl"
TORN_FILE = "results.jsonl.torn"  # torn last lines set aside (recall_eval.store.RunStore._cut_torn_tail)
HOME_ENV = "RECALL_EVAL_HOME"
StoredModel = TypeVar("StoredModel", bound=BaseModel)


def runs_home() -> Path:
    """Where run directories live: $RECALL_EVAL_HOME, else ./runs."""
    return Path(os.environ.get(HOME_ENV) or "runs")


def named_dir(path: str | Path) -> Path:
    """A run or compare directory as the user named it: the path itself, or, when no such path exists
    and it is a bare name, that id under the runs home (`recall-eval runs` prints ids, not paths)."""
    given = Path(path)
    if given.exists() or len(given.parts) != 1 or given.name in (".", ".."):
        return given
    under_home = runs_home() / given
    return under_home if under_home.is_dir() else given


def new_run_id(spec: RunSpec) -> str:
    """A sortable, unique id: UTC timestamp, then a short hash of the spec and the clock."""
    now_ns = time.time_ns()
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime(now_ns / 1e9))
    digest = hashlib.sha256(f"{spec.model_dump_json()}|{now_ns}|{os.getpid()}".encode()).hexdigest()
    return f"{stamp}-{digest[:6]}"


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomically(path: Path, data: bytes) -> None:
    """Replace `path` with `data` so that a reader sees the old or the new file, never a mix, and a
    crash leaves one of them: a temporary file beside it (named by process and thread), fsynced, renamed
    over it, the directory fsynced. Every stored file that is rewritten whole goes through here."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    with open(tmp, "wb") as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path)
    _fsync_dir(path.parent)


@dataclass(frozen=True)
class UnreadableLine:
    """A whole line of results.jsonl that does not read as a Result: kept in the file, not counted,
    reported (a damaged copy, a hand edit, a field of a newer format whose meaning changed)."""

    line: int  # 1-based line number
    reason: str  # what is wrong with it, in a few words

    def describe(self) -> str:
        return (
            f"{RESULTS_FILE} line {self.line} cannot be read ({self.reason}); kept in the file, not counted"
        )


@dataclass(frozen=True)
class ParsedResults:
    results: list[Result]  # every whole line that reads as a Result, in order
    unreadable: list[UnreadableLine]  # whole lines that do not
    torn: bytes  # a last line without its newline (a crash mid-write); b"" when there is none


def invalid_field(err: ValidationError) -> str:
    """The first thing a stored file's validation found, as 'field.path: message' (for its one line)."""
    first = err.errors()[0]
    return ".".join(str(part) for part in first["loc"]) + f": {first['msg']}"


def read_versioned(
    path: Path,
    model: type[StoredModel],
    newest: int,
    what: str,
    name: str | None = None,
    error: type[UserError] = UserError,
) -> StoredModel:
    """A stored JSON file of a versioned format (format_version) as its model, or one line naming the
    file (`name`, default its path) and what is wrong: unreadable, torn or not JSON, not an object, a
    format newer than `newest` (upgrade recall-eval), a field that does not validate. The model keeps
    fields it does not know (extra="allow"), so a rewrite does not drop a newer writer's additions."""
    name = name or str(path)
    try:
        data = json.loads(path.read_bytes())
    except OSError as err:
        raise error(f"cannot read {name}: {err.strerror}") from None
    except ValueError as err:
        raise error(f"{name} is not a valid {what} (not JSON: {err})") from None
    if not isinstance(data, dict):
        raise error(f"{name} is not a valid {what} (not a JSON object)")
    version = data.get("format_version")
    if isinstance(version, int) and version > newest:
        raise UserError(
            f"{name}: {what} format {version} is newer than this recall-eval reads ({newest} and older); "
            "upgrade recall-eval"
        )
    try:
        return model.model_validate(data)
    except ValidationError as err:
        raise error(f"{name} is not a valid {what} ({invalid_field(err)})") from None


def _why_unreadable(err: ValidationError) -> str:
    first = err.errors()[0]
    if first["type"] == "json_invalid":
        return "not JSON"
    where = ".".join(str(part) for part in first["loc"])
    more = f" and {err.error_count() - 1} more" if err.error_count() > 1 else ""
    return f"{where}: {first['msg']}{more}" if where else f"{first['msg']}{more}"


def _parse_results(raw: bytes) -> ParsedResults:
    """Parse results.jsonl bytes. Only a last line without a newline is a torn write (a crash while
    it was written); every whole line is kept, and one that does not read as a Result is reported."""
    lines = raw.split(b"\n")
    torn = lines.pop()  # b"" when the file ends with a newline
    results: list[Result] = []
    unreadable: list[UnreadableLine] = []
    for index, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            results.append(Result.model_validate_json(line))
        except ValidationError as err:
            unreadable.append(UnreadableLine(index + 1, _why_unreadable(err)))
    return ParsedResults(results, unreadable, torn)


def _read_run_file(run_file: Path) -> Run:
    """run.json as a Run: an older format migrated (recall_eval.migrations), a newer one refused by name."""
    raw = run_file.read_bytes()
    try:
        data = json.loads(raw)
    except ValueError as err:
        raise UserError(f"{run_file} is not a valid run file (not JSON: {err})") from None
    if not isinstance(data, dict):
        raise UserError(f"{run_file} is not a valid run file (not a JSON object)")
    try:
        data = migrate_run(data, str(run_file))
    except NewerFormat as err:
        raise UserError(str(err)) from None
    try:
        return Run.model_validate(data)
    except ValidationError as err:
        raise UserError(f"{run_file} is not a valid run file ({invalid_field(err)})") from err


class RunStore:
    """One run directory. Create it with RunStore.create, reopen it with RunStore.open."""

    def __init__(self, path: Path, run: Run):
        self.path = path
        self.run = run
        self._tail_checked = False
        # run.json's writers (the event loop, a relaunch in a worker thread) take turns (update_run)
        self._run_lock = threading.RLock()
        # masks secrets in everything written (recall_eval.redact); give it the run's secrets to mask
        self.redactor = Redactor()

    @classmethod
    def create(cls, run: Run, root: Path | None = None) -> RunStore:
        base = root if root is not None else runs_home()
        path = base / run.run_id
        try:
            path.mkdir(parents=True, exist_ok=False)
        except FileExistsError as err:
            raise BadInput(f"run directory {path} already exists; pick another --out") from err
        except OSError as err:
            raise UserError(f"cannot create run directory {path}: {err.strerror}; check --out") from err
        store = cls(path, run)
        store.write_run(run)
        (path / RESULTS_FILE).touch()
        return store

    @classmethod
    def open(cls, run_dir: Path) -> RunStore:
        run_dir = named_dir(run_dir)
        if run_dir.name == RUN_FILE and run_dir.is_file():  # runs/x/run.json names its directory
            run_dir = run_dir.parent
        run_file = run_dir / RUN_FILE
        if not run_dir.is_dir():
            raise BadInput(f"run directory {run_dir} does not exist; `recall-eval runs` lists the runs")
        if not run_file.is_file():
            raise BadInput(f"{run_dir} is not a run directory (no {RUN_FILE}); pass a directory under runs/")
        return cls(run_dir, _read_run_file(run_file))

    @property
    def results_path(self) -> Path:
        return self.path / RESULTS_FILE

    def write_run(self, run: Run) -> None:
        """Replace run.json atomically: a reader sees the old or the new file, never a mix.
        Secrets are masked and /server_info cut to its allow-list first (recall_eval.redact)."""
        run = redact_run(run, self.redactor)
        with self._run_lock:
            self.run = run
            write_atomically(self.path / RUN_FILE, run.model_dump_json(indent=2).encode("utf-8"))

    def update_run(self, change: Callable[[Run], Run]) -> Run:
        """Write `change(current run)` as one step under the store's lock: changes made at the same time
        (an adaptation on the event loop, a relaunch count from a worker thread) never overwrite each
        other, as a read of store.run followed by a later write_run could."""
        with self._run_lock:
            self.write_run(change(self.run))
            return self.run

    def append_result(self, result: Result) -> None:
        """Append one Result as one JSON line, written and fsynced before returning."""
        with self.appender() as appender:
            appender.append(result)

    def appender(self) -> ResultAppender:
        """results.jsonl held open for appending (a torn last line is cut first): for a writer that
        appends many results, without an open and a close per line."""
        if not self._tail_checked:
            self._cut_torn_tail()
            self._tail_checked = True
        return ResultAppender(self)

    def _cut_torn_tail(self) -> None:
        """A torn last line (no newline: a crash mid-write) is set aside in results.jsonl.torn and cut,
        so that the next line starts on a line of its own. Whole lines are never cut."""
        if not self.results_path.exists():
            return
        raw = self.results_path.read_bytes()
        torn = _parse_results(raw).torn
        if torn:
            with open(self.path / TORN_FILE, "ab") as aside:
                aside.write(torn + b"\n")
                aside.flush()
                os.fsync(aside.fileno())
            with open(self.results_path, "r+b") as handle:
                handle.truncate(len(raw) - len(torn))
                handle.flush()
                os.fsync(handle.fileno())

    def read_results(self) -> ParsedResults:
        """results.jsonl as stored: every line that reads as a Result, the whole lines that do not, and
        a torn last line."""
        if not self.results_path.exists():
            return ParsedResults([], [], b"")
        return _parse_results(self.results_path.read_bytes())

    def attempts(self) -> list[Result]:
        """Every stored line, in order: a case run again by `--retry` has one line per attempt."""
        return self.read_results().results

    def unreadable(self) -> list[UnreadableLine]:
        """Whole lines of results.jsonl that do not read as a Result (kept, not counted)."""
        return self.read_results().unreadable

    def results(self) -> list[Result]:
        """What counts: each case's latest attempt (what reports, summaries and resume read)."""
        return list(latest_by_case(self.attempts()).values())

    def final_case_ids(self, retry: Collection[str] = ()) -> set[str]:
        """Case ids with a stored result (in-flight cases are never stored). retry: outcomes that do
        not count as final (`--retry error,timeout`); a case's latest line decides."""
        return {result.case_id for result in self.results() if result.outcome not in retry}


class ResultAppender:
    """An O_APPEND descriptor on results.jsonl: each append writes one whole line (secrets masked
    with the store's redactor of the moment) and fsyncs it before returning. Use as a context
    manager, or close() it."""

    def __init__(self, store: RunStore):
        self.store = store
        self.fd = os.open(store.results_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    def append(self, result: Result) -> None:
        line = memoryview((redact_result(result, self.store.redactor).model_dump_json() + "\n").encode())
        while line:  # a short write (a full disk, a signal) writes the rest, or raises OSError
            line = line[os.write(self.fd, line) :]
        os.fsync(self.fd)

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def __enter__(self) -> ResultAppender:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def latest_by_case(results: Iterable[Result]) -> dict[str, Result]:
    """Each case's latest result: a retried case keeps its earlier attempts in results.jsonl, the last
    line counts."""
    latest: dict[str, Result] = {}
    for result in results:
        latest.pop(result.case_id, None)
        latest[result.case_id] = result  # re-inserted: dict order follows the latest attempt
    return latest


def load_run(run_dir: Path) -> tuple[Run, list[Result]]:
    store = RunStore.open(run_dir)
    return store.run, store.results()


@dataclass(frozen=True)
class UnreadableRun:
    """A run (or compare) directory whose run.json (compare.json) cannot be read: listed with the
    reason, never hidden."""

    path: Path
    reason: str  # one line: what is wrong and what to do (a newer format names the upgrade)


def scan_runs(root: Path | None = None) -> tuple[list[RunStore], list[UnreadableRun]]:
    """Every run directory under root (default runs_home()), oldest first, and those that cannot be
    read; directories without a run.json are not runs and are skipped."""
    base = root if root is not None else runs_home()
    if not base.is_dir():
        return [], []
    stores, unreadable = [], []
    for child in sorted(base.iterdir()):
        if (child / RUN_FILE).is_file():
            try:
                stores.append(RunStore.open(child))
            except UserError as err:
                unreadable.append(UnreadableRun(child, str(err)))
    return stores, unreadable


def list_runs(root: Path | None = None) -> list[RunStore]:
    """Every readable run directory under root (default runs_home()), oldest first (scan_runs also
    says which could not be read)."""
    return scan_runs(root)[0]
