"""What the library returns and raises: a stored run, a compare, and how a run stopped early."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

import pandas as pd

from recall_eval.baseline_gate import ScopeTest
from recall_eval.errors import UserError
from recall_eval.exit_codes import EXIT_OK, Verdict
from recall_eval.frame import frame_of, headline_frame, planned_cases, without_baselines
from recall_eval.run_owner import shown_status
from recall_eval.stats import recall_table, score_table
from recall_eval.store import RunStore
from recall_eval.types import Profile, Result, Run

REPORT_FILE = "report.html"


@dataclass(frozen=True)
class RunRecord:
    """One run directory as loaded: run.json, every stored result, and its report if rendered."""

    path: Path  # the run directory (runs/<run-id>)
    run: Run  # run.json: spec, profile, server info, versions, status
    results: tuple[Result, ...]  # results.jsonl, one per finished case, in the order they finished
    report: Path | None = None  # report.html, when it exists
    reused: bool = False  # compare only: a finished run found in the store, not run again
    # a run just made: how a CI job should end (exit code, --fail-under lines); None for a run loaded
    # as it is. A judgement of the run, not part of it: records compare equal without it.
    verdict: Verdict | None = field(default=None, compare=False)
    # sweep --baseline: each suite (and pooled) tested against the baseline (recall_eval.baseline_gate)
    baseline_tests: tuple[ScopeTest, ...] = field(default=(), compare=False)

    @classmethod
    def from_store(cls, store: RunStore, reused: bool = False) -> RunRecord:
        report = store.path / REPORT_FILE
        return cls(
            path=store.path,
            run=store.run,
            results=tuple(store.results()),
            report=report if report.is_file() else None,
            reused=reused,
        )

    @property
    def run_id(self) -> str:
        return self.run.run_id

    @property
    def status(self) -> str:
        """running, interrupted, finished or failed (as in run.json)."""
        return self.run.status

    @property
    def status_now(self) -> str:
        """The status as it is now: `interrupted (no process)` for a run stored as running whose
        process is gone (killed without a word); else `status` (recall_eval.run_owner)."""
        return shown_status(self.run)

    @property
    def variant(self) -> str:
        return self.run.spec.variant

    @property
    def profile(self) -> Profile | None:
        return self.run.profile

    @property
    def cases_total(self) -> int | None:
        """Cases the run's spec asks for (recall_eval.frame.planned_cases: counted from its suites'
        cases, a file suite's rows included); None for an older run of a file suite."""
        return planned_cases(self.run)

    @property
    def cases_done(self) -> int:
        return len({result.case_id for result in self.results})

    @cached_property
    def frame(self) -> pd.DataFrame:
        """The results as a DataFrame, one row per case (recall_eval.frame; columns in README), with
        `outcome`/`passed` the run's headline verdict (Run.scoring; recall_eval.frame.headline_frame)."""
        return headline_frame(frame_of([(self.run, self.results)]), self.run.scoring)

    @cached_property
    def _recall_row(self) -> pd.Series:
        """The stats.recall_table row of the pass/miss suites' cases: a scored suite's cases (a metric
        grades them in [0, 1]) have a score, not a pass (see `score`)."""
        frame = without_baselines(self.frame)  # a no-context baseline is shown beside, never pooled
        plain = frame[frame["metric"].isna()] if "metric" in frame else frame
        return recall_table(plain).iloc[0]

    @property
    def passes(self) -> int:
        """Passes of the pass/miss suites' cases."""
        return int(self._recall_row["passes"])

    @property
    def answered(self) -> int:
        """Pass/miss suites' cases answered by a live model (the recall denominator; infrastructure
        outcomes excluded)."""
        return int(self._recall_row["answered"])

    @property
    def recall(self) -> float | None:
        """Passes over answered cases of the pass/miss suites, pooled when several; None when nothing
        of theirs was answered."""
        value = self._recall_row["recall"]
        return None if pd.isna(value) else float(value)

    @property
    def score(self) -> float | None:
        """Mean score of the scored suites' answered cases (stats.score_table); None without any."""
        frame = without_baselines(self.frame)
        if "metric" not in frame or not frame["metric"].notna().any():
            return None
        value = score_table(frame[frame["metric"].notna()]).iloc[0]["score"]
        return None if pd.isna(value) else float(value)


@dataclass(frozen=True)
class CompareRecord:
    """A compare directory and the run of each variant, in the variants' order."""

    path: Path  # runs/compare-<id>
    report: Path  # compare.html
    labels: tuple[str, ...]
    runs: tuple[RunRecord, ...]
    # how a CI job should end (exit code, and a line per unmet threshold or regression): --fail-under,
    # --fail-on-regression, and 3 when a variant got no answer from a live model
    verdict: Verdict = Verdict(EXIT_OK, ())

    @property
    def pairs(self) -> list[dict]:
        """Each variant against the first as compare.json states it: overall paired test (flips,
        exact McNemar p), per-case speed changes, interleaved, minutes apart."""
        path = self.path / "compare.json"
        return list(json.loads(path.read_text(encoding="utf-8")).get("numbers", {}).get("pairs", []))

    @property
    def verdict_text(self) -> str:
        """The compare report's verdict paragraph."""
        return str(json.loads((self.path / "compare.json").read_text(encoding="utf-8")).get("verdict", ""))


@dataclass(frozen=True)
class StudyRecord:
    """A study directory: every cell's run (cells not launched have none) and the family's figures as
    frames (recall_eval.study_stats.StudyNumbers: cells, tests, lengths, misses)."""

    path: Path  # runs/study-<id>
    report: Path  # study.html
    baseline: str  # the baseline cell's label
    labels: tuple[str, ...]  # every cell, in order (launched or not)
    runs: dict[str, RunRecord]  # label -> run, for the cells that ran
    cells: pd.DataFrame  # one row per cell that ran: recall, interval, effective length, speed, memory, p
    tests: pd.DataFrame  # one row per cell x scope (pooled, suite:, length:): McNemar raw and Holm-adjusted p
    lengths: pd.DataFrame  # one row per cell x length: recall with its Wilson interval
    misses: pd.DataFrame  # one row per cell x length x depth
    recommendation: str  # the stated answer
    verdict: Verdict = Verdict(EXIT_OK, ())

    @property
    def study(self) -> dict:
        """study.json as stored (manifest, plans, numbers, recommendation)."""
        return dict(json.loads((self.path / "study.json").read_text(encoding="utf-8")))


class RunStopped(UserError):
    """A run ended early and was marked failed in run.json; str() says why.

    `gave_up`: the runner stopped (server died, too many errors): resuming may finish it. Otherwise a
    UserError was met on the way; with exit_code 2 it was bad input stored in the spec, which a resume
    would meet again.
    """

    def __init__(self, reason: UserError, run_dir: Path, label: str, gave_up: bool):
        super().__init__(str(reason), reason.exit_code)
        self.run_dir = run_dir
        self.label = label
        self.gave_up = gave_up

    @property
    def bad_input(self) -> bool:
        return self.exit_code == 2


class RunInterrupted(KeyboardInterrupt):
    """Ctrl-C during a run: run.json says interrupted; resume finishes it."""

    def __init__(self, run_dir: Path, label: str):
        super().__init__(f"run {run_dir} interrupted")
        self.run_dir = run_dir
        self.label = label
