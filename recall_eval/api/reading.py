"""Reading stored runs: one run directory, every run under the runs home, and the compare directories."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from recall_eval.api.records import RunRecord
from recall_eval.compare_store import COMPARE_FILE, COMPARE_HTML, read_manifest, run_dir_of
from recall_eval.errors import UserError
from recall_eval.frame import check_scoring
from recall_eval.store import RunStore, UnreadableRun, list_runs, named_dir, runs_home, scan_runs

if TYPE_CHECKING:
    from launchers.server_records import Leftover


def load_run(path: Path | str) -> RunRecord:
    """The run in `path` (a runs/<run-id> directory): run.json, its results, its report if rendered.

    Raises UserError when `path` is not a run directory or run.json does not parse.
    """
    return RunRecord.from_store(RunStore.open(Path(path)))


def render_report(path: Path | str, scoring: str | None = None) -> Path:
    """Render a run directory's report.html, a compare directory's compare.html, or a study's study.html again from what is
    stored (no server); returns the file's path. UserError when `path` is neither. `scoring` picks the
    headline verdict ("lenient" or "strict"; default: what the run or compare chose)."""
    check_scoring(scoring)
    import reports
    from reports.compare_report import render_compare

    path = named_dir(path)  # a bare id as `runs` prints it
    if (path / COMPARE_FILE).is_file():
        return render_compare(path, scoring)
    if (path / "study.json").is_file():  # a study: its figures recomputed from its runs, its page rendered
        from recall_eval.api.studying import load_study

        return load_study(path).report
    return reports.render_report(
        RunStore.open(path).path, scoring
    )  # a missing or foreign directory: one line


def _root(home: Path | str | None) -> Path:
    return Path(home) if home is not None else runs_home()


def runs(home: Path | str | None = None) -> list[RunRecord]:
    """Every readable run under `home` (default: $RECALL_EVAL_HOME, else ./runs), oldest first
    (unreadable_runs lists the others)."""
    return [RunRecord.from_store(store) for store in list_runs(_root(home))]


def unreadable_runs(home: Path | str | None = None) -> list[UnreadableRun]:
    """Run directories under `home` whose run.json cannot be read, each with the reason (a newer
    format names the recall-eval that wrote it)."""
    return scan_runs(_root(home))[1]


@dataclass(frozen=True)
class CompareEntry:
    """A compare directory as listed: its variants and their run directories (not loaded)."""

    path: Path  # runs/compare-<id>
    compare_id: str
    created_at: float
    command: str | None  # the command line that made it
    labels: tuple[str, ...]  # the variants, baseline first
    run_dirs: tuple[Path, ...]  # each variant's run directory
    report: Path | None  # compare.html, when rendered


def compares(home: Path | str | None = None) -> list[CompareEntry]:
    """Every readable compare directory under `home`, oldest first (unreadable_compares lists the others)."""
    return _scan_compares(_root(home))[0]


def unreadable_compares(home: Path | str | None = None) -> list[UnreadableRun]:
    """Compare directories under `home` whose compare.json cannot be read (torn, invalid, of a newer
    format), each with the reason: listed, never skipped in silence."""
    return _scan_compares(_root(home))[1]


def _scan_compares(root: Path) -> tuple[list[CompareEntry], list[UnreadableRun]]:
    if not root.is_dir():
        return [], []
    entries, unreadable = [], []
    for child in sorted(root.iterdir()):
        if not (child / COMPARE_FILE).is_file():
            continue
        try:
            manifest = read_manifest(child)
        except UserError as err:
            unreadable.append(UnreadableRun(child, str(err)))
            continue
        html = child / COMPARE_HTML
        entries.append(
            CompareEntry(
                path=child,
                compare_id=manifest.compare_id,
                created_at=manifest.created_at,
                command=manifest.command,
                labels=tuple(item.label for item in manifest.variants),
                run_dirs=tuple(Path(os.path.normpath(run_dir_of(child, item))) for item in manifest.variants),
                report=html if html.is_file() else None,
            )
        )
    return sorted(entries, key=lambda entry: entry.created_at), unreadable


def leftover_servers(run_dir: Path | str) -> list[Leftover]:
    """Servers a run started (servers.json) that are still running though no live harness owns them:
    a server whose harness was killed along with the guard that should have stopped it."""
    from launchers.server_records import find_leftovers

    return [leftover for leftover in find_leftovers(Path(run_dir)) if not _harness_alive(leftover)]


def stop_leftover_server(leftover: Leftover) -> bool:
    """SIGTERM its process group, SIGKILL after a grace period; True when nothing of it is left."""
    from launchers.server_records import stop_leftover

    return stop_leftover(leftover)


def _harness_alive(leftover: Leftover) -> bool:
    """The harness that started it still runs (a sweep in progress): its server is not a leftover."""
    import psutil

    try:
        harness = psutil.Process(leftover.record.harness_pid)
        return (
            harness.create_time() <= leftover.record.started_at + 1.0
            and harness.status() != psutil.STATUS_ZOMBIE
        )
    except psutil.Error:
        return False
