"""recall-eval as a library: what the CLI calls, usable from a notebook or a script.

    from recall_eval import api
    run = api.sweep(lengths="338..4096", depths="0,50,100", trials=1)   # launches the reference engine
    run.recall, run.path, run.results                                    # a RunRecord
    same = api.load_run(run.path)
    df = api.results_frame(run)                                          # one row per case (pandas)

Functions: sweep, resume, compare, study (and load_study), load_run, runs, unreadable_runs, compares,
unreadable_compares, render_report,
rescore; results_frame, runs_frame and
export (results as data); recall_eval.api.servers for serve, plan and profiles. Options are typed
(SweepOptions, CompareOptions, ResumeOptions, grouped into GridOptions, RequestOptions, TargetOptions);
every field defaults to None (unset), and each option is declared once, with its default, in
recall_eval.api.options. Progress and notes go to a Hooks object (default: the `recall_eval` logger).

Each name is imported on first use (PEP 562), so that `import recall_eval.api` (and the CLI's --help)
does not pay for pandas and scipy up front.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

# name -> the module that defines it
_HOMES = {
    "compare": "comparing",
    "load_study": "studying",
    "study": "studying",
    "StudyOptions": "options",
    "StudyRecord": "records",
    "export": "data",
    "results_frame": "data",
    "runs_frame": "data",
    "Hooks": "hooks",
    "SweepProgress": "hooks",
    "CiOptions": "options",
    "ClusterOptions": "options",
    "ray_status": "cluster",
    "CompareOptions": "options",
    "GridOptions": "options",
    "RequestOptions": "options",
    "ResumeOptions": "options",
    "SweepOptions": "options",
    "TargetOptions": "options",
    "CompareEntry": "reading",
    "compares": "reading",
    "load_run": "reading",
    "render_report": "reading",
    "runs": "reading",
    "unreadable_compares": "reading",
    "unreadable_runs": "reading",
    "rescore": "rescoring",
    "CompareRecord": "records",
    "RunInterrupted": "records",
    "RunRecord": "records",
    "RunStopped": "records",
    "resume": "sweeping",
    "sweep": "sweeping",
}

if TYPE_CHECKING:
    from recall_eval.api.cluster import ray_status
    from recall_eval.api.comparing import compare
    from recall_eval.api.data import export, results_frame, runs_frame
    from recall_eval.api.hooks import Hooks, SweepProgress
    from recall_eval.api.options import (
        CiOptions,
        ClusterOptions,
        CompareOptions,
        GridOptions,
        RequestOptions,
        ResumeOptions,
        StudyOptions,
        SweepOptions,
        TargetOptions,
    )
    from recall_eval.api.reading import (
        CompareEntry,
        compares,
        load_run,
        render_report,
        runs,
        unreadable_compares,
        unreadable_runs,
    )
    from recall_eval.api.records import CompareRecord, RunInterrupted, RunRecord, RunStopped, StudyRecord
    from recall_eval.api.rescoring import rescore
    from recall_eval.api.studying import load_study, study
    from recall_eval.api.sweeping import resume, sweep


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'recall_eval.api' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"recall_eval.api.{home}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_HOMES])


__all__ = [
    "CiOptions",
    "ClusterOptions",
    "CompareEntry",
    "CompareOptions",
    "CompareRecord",
    "GridOptions",
    "Hooks",
    "RequestOptions",
    "ResumeOptions",
    "RunInterrupted",
    "RunRecord",
    "RunStopped",
    "StudyOptions",
    "StudyRecord",
    "SweepOptions",
    "SweepProgress",
    "TargetOptions",
    "compare",
    "compares",
    "export",
    "load_run",
    "load_study",
    "render_report",
    "rescore",
    "results_frame",
    "resume",
    "runs",
    "runs_frame",
    "ray_status",
    "study",
    "sweep",
    "unreadable_compares",
    "unreadable_runs",
]
