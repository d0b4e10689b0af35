"""A sweep as a CI gate: the run with --fail-fast's looks, its verdict against a stored baseline, and
what CI reads afterwards (--junit, the step summary, --metrics). sweeping.sweep hands a new run here
when any CI option is given. See recall_eval.api.baselines (the baseline), recall_eval.api.fail_fast
(the looks), reports.junit / reports.step_summary / reports.metrics_file (the files)."""

from __future__ import annotations

import dataclasses
import os
import platform
from pathlib import Path
from typing import Any

from recall_eval.api.baselines import baseline_verdict
from recall_eval.api.fail_fast import FailFastStop, Watch, WatchedHooks, final_alpha
from recall_eval.api.hooks import Hooks
from recall_eval.api.options import CiOptions, CompareOptions, SweepOptions
from recall_eval.api.records import CompareRecord, RunRecord, RunStopped
from recall_eval.api.sweeping import execute, finished_record
from recall_eval.baseline_store import Baseline
from recall_eval.exit_codes import EXIT_BELOW_GATE, RecallGate, Verdict
from recall_eval.store import RunStore
from recall_eval.types import Profile
from recall_eval.version import package_version

STEP_SUMMARY_ENV = "GITHUB_STEP_SUMMARY"  # GitHub Actions sets it to a file the job's summary is read from


def gated_run(
    store: RunStore,
    profile: Profile,
    hooks: Hooks,
    options: SweepOptions,
    gate: RecallGate | None,
    baseline: Baseline | None,
    tolerance: float | None,
) -> RunRecord:
    """Run the new run `store` as a gate and write what CI reads; the record's verdict is the gate's."""
    ci = options.ci
    watched = hooks
    if ci.fail_fast:
        spec = store.run.spec
        watch = Watch(
            planned=store.run.cases_planned or 0,
            suites=spec.suites,
            scoring=store.run.scoring,
            gate=gate,
            baseline=baseline.frame() if baseline is not None else None,
            baseline_name=baseline.name if baseline is not None else "",
            tolerance=(baseline.tolerance if tolerance is None else tolerance)
            if baseline is not None
            else 0.0,
        )
        watched = WatchedHooks(hooks, watch)
    stopped: FailFastStop | None = None
    try:
        record = execute(store, profile, watched, options.request, render=options.render_report, gate=gate)
    except RunStopped as stop:
        if not isinstance(stop.__cause__, FailFastStop):
            raise
        stopped = stop.__cause__
        record = finished_record(RunStore.open(store.path), hooks, options.render_report, gate)
    if baseline is not None:
        ending, tests = baseline_verdict(baseline, record, tolerance, final_alpha(ci.fail_fast))
        record = dataclasses.replace(record, verdict=ending, baseline_tests=tests)
    if stopped is not None:
        record = dataclasses.replace(record, verdict=Verdict(EXIT_BELOW_GATE, (*stopped.lines, str(stopped))))
    write_ci_files(record, ci, gate, baseline, tolerance)
    return record


def hardware_seen() -> dict[str, Any]:
    """The machine the harness ran on (the server's own is in server_info, where it said)."""
    return {
        "machine": platform.machine(),
        "processor": platform.processor() or None,
        "cpus": os.cpu_count(),
        "system": platform.platform(),
        "python": platform.python_version(),
    }


def step_summary_path(ci: CiOptions | CompareOptions) -> Path | None:
    if ci.step_summary is not None:
        return Path(ci.step_summary)
    found = os.environ.get(STEP_SUMMARY_ENV)
    return Path(found) if found else None


def wants_ci_files(ci: CiOptions | CompareOptions) -> bool:
    return bool(ci.junit or ci.metrics or step_summary_path(ci))


def write_ci_files(
    record: RunRecord,
    ci: CiOptions,
    gate: RecallGate | None,
    baseline: Baseline | None,
    tolerance: float | None,
) -> None:
    """--junit, the step summary and --metrics of a finished (or fail-fast stopped) gated run."""
    summary = step_summary_path(ci)
    if not (ci.junit or ci.metrics or summary):
        return
    from reports.gate_cells import gate_cells
    from reports.junit import write_junit
    from reports.metrics_file import metrics_document, write_metrics
    from reports.step_summary import append_step_summary, step_summary

    ending = record.verdict or Verdict(0, ())
    frame = record.frame
    cells = gate_cells(frame, gate, record.baseline_tests, baseline.frame() if baseline is not None else None)
    if ci.junit:
        write_junit(Path(ci.junit), [(f"recall-eval.{record.run.spec.variant}", cells)])
    if summary is not None:
        text = step_summary(
            record.run,
            frame,
            cells,
            record.baseline_tests,
            ending.exit_code,
            ending.lines,
            baseline.name if baseline is not None else None,
            ci.commit,
        )
        append_step_summary(summary, text)
    if ci.metrics:
        about = None
        if baseline is not None:
            about = {
                "name": baseline.name,
                "source_run": baseline.source_run,
                "tolerance": baseline.tolerance if tolerance is None else tolerance,
            }
        document = metrics_document(
            record.run,
            record.path,
            frame,
            cells,
            record.baseline_tests,
            ending.exit_code,
            ending.lines,
            package_version(),
            hardware_seen(),
            ci.commit,
            about,
        )
        write_metrics(Path(ci.metrics), document)


def write_compare_ci_files(record: CompareRecord, options: CompareOptions, gate: RecallGate | None) -> None:
    """--junit, the step summary and --metrics of a finished compare: every variant's cells (a later
    variant's suites that --fail-on-regression found worse than the first fail where they lost cases)."""
    summary = step_summary_path(options)
    if not wants_ci_files(options):
        return
    from recall_eval.api.gating import OVERALL, regressions
    from reports.gate_cells import gate_cells
    from reports.junit import write_junit
    from reports.metrics_file import metrics_document, write_metrics
    from reports.step_summary import append_step_summary, step_summary

    found = regressions(record.labels, record.runs) if options.fail_on_regression else []
    base = record.runs[0].frame
    groups, texts, documents = [], [], []
    for index, (label, run) in enumerate(zip(record.labels, record.runs, strict=True)):
        failing = {r.suite for r in found if r.variant == label}
        if OVERALL in failing:
            failing |= set(run.frame["suite"])
        cells = gate_cells(run.frame, gate, (), base if index else None, failing)
        groups.append((f"recall-eval.{label}", cells))
        mine = [line for line in record.verdict.lines if line.startswith(f"variant {label},")]
        code = record.verdict.exit_code if mine else 0
        texts.append(step_summary(run.run, run.frame, cells, (), code, mine, None, options.commit))
        documents.append(
            metrics_document(
                run.run,
                run.path,
                run.frame,
                cells,
                (),
                code,
                mine,
                package_version(),
                hardware_seen(),
                options.commit,
            )
        )
    if options.junit:
        write_junit(Path(options.junit), groups)
    if summary is not None:
        ending = record.verdict
        head = f"# recall-eval compare {' vs '.join(record.labels)}: {'passed' if not ending.exit_code else f'failed (exit {ending.exit_code})'}\n\n"
        append_step_summary(
            summary,
            head
            + "".join(
                f"### variant {label}\n\n{text}\n" for label, text in zip(record.labels, texts, strict=True)
            ),
        )
    if options.metrics:
        document = {
            "format_version": documents[0]["format_version"],
            "compare": str(record.path),
            "verdict": {
                "exit_code": record.verdict.exit_code,
                "passed": record.verdict.exit_code == 0,
                "lines": list(record.verdict.lines),
            },
            "variants": [
                {"label": label, **doc} for label, doc in zip(record.labels, documents, strict=True)
            ],
        }
        write_metrics(Path(options.metrics), document)
