"""study: the cross product of the axes' cells, each a compare variant run on identical cases, planned
before anything launches, then tested as one family against the baseline cell.

Order of work: every cell resolved (BadInput before anything starts), then planned (launchers.cell_plan:
KV slots, sequences of the longest request at once, fit or not); cells predicted not to fit are listed
with the reason and not launched unless `force`. Then cell by cell, one server at a time (each stopped
before the next starts), or with --ray all cells at once on the cluster (recall_eval.api.cluster_runs, as
`compare --ray`; study.json's `measurement` says so): a finished run with the same spec, target and reuse
key is reused, an interrupted one resumed (recall_eval.api.comparing.obtain_run), else the cell runs from
scratch. study.json is rewritten after every cell, so an interrupted study says where it stopped; running the
same study again (same axes, cases and target: the same runs/study-<id>/) resumes it, nothing lost or
run twice. Last, the numbers (recall_eval.study_stats) go into study.json and study.html.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
import shlex
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from recall_eval.api.comparing import PlannedVariant, obtain_run, plan_variants, target_key
from recall_eval.api.gating import recall_gate
from recall_eval.api.hooks import Hooks
from recall_eval.api.options import StudyOptions, updated
from recall_eval.api.records import RunInterrupted, RunRecord, RunStopped, StudyRecord
from recall_eval.api.searching import SearchRecord, run_search
from recall_eval.api.sweeping import build_spec, check_lengths_of, request_auth
from recall_eval.cliff import LengthSearch, is_search, parse_search
from recall_eval.compare_store import relative_run_dir
from recall_eval.errors import BadInput, UserError
from recall_eval.exit_codes import study_verdict
from recall_eval.frame import check_scoring
from recall_eval.redact import Redactor
from recall_eval.stats import SIGNIFICANCE
from recall_eval.store import RunStore, runs_home
from recall_eval.study_axes import Axis, cells_of, parse_axes, select_cells
from recall_eval.study_store import (
    COSTS,
    STUDY_FILE,
    CellPlan,
    StudyCell,
    StudyManifest,
    read_study,
    run_dir_of,
    write_study_file,
)
from recall_eval.types import RunSpec

if TYPE_CHECKING:
    from launchers.executors import Executor

# How the cells' speeds were measured, as study.json and the page state it.
SEQUENTIAL = (
    "sequential: each cell's server was launched alone, one after another on this machine; the speed "
    "intervals (bootstrap of the median over cases) describe each cell, differences between cells are not tested"
)
ON_RAY = (
    "at the same time on a Ray cluster: the cells' servers were started at once and Ray placed them (each "
    "run's placements.json says on which node and when); cells whose servers shared a node slowed each "
    "other, so the speed intervals describe each cell as it ran, differences between cells are not tested"
)


def study_id(axes: Sequence[Axis], planned: Sequence[PlannedVariant]) -> str:
    """Named by what is studied (cells, cases, targets): the same study maps to the same directory."""
    payload = [
        {"label": p.label, "spec": p.spec.model_dump(mode="json"), "target": target_key(p.profile)}
        for p in planned
    ]
    digest = hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()
    slug = re.sub(r"[^A-Za-z0-9]+", "-", "-x-".join(axis.key for axis in axes)).strip("-")[:40]
    return f"study-{slug}-{digest[:8]}"


def _check_cost(cost: str | None) -> str:
    value = cost or "memory"
    if value not in COSTS:
        raise BadInput(f"--cost {value!r}: must be one of {', '.join(COSTS)}")
    return value


def plan_cells(planned: Sequence[PlannedVariant], spec: RunSpec) -> list[CellPlan]:
    """Each cell's memory plan at the study's longest length and answer budget."""
    from launchers.cell_plan import plan_cell

    return [plan_cell(p.profile, max(spec.lengths), spec.max_tokens) for p in planned]


def _happened(run: RunRecord) -> str:
    """What a forced cell's run did, in a few words (to stand beside the plan's prediction)."""
    outcomes = run.frame["outcome"].value_counts()
    counts = ", ".join(f"{count} {outcome}" for outcome, count in outcomes.items())
    return f"ran {len(run.frame)} cases: {counts}"


def _kv_bytes(run: RunRecord, plan: CellPlan) -> float | None:
    reported = run.run.server_info.get("kv_bytes_per_token")
    return float(reported) if isinstance(reported, int | float) else plan.kv_bytes_per_token


class _Study:
    """The study directory as it fills: the manifest rewritten after every cell."""

    def __init__(self, path: Path, manifest: StudyManifest):
        self.path = path
        self.manifest = manifest
        self.lock = threading.Lock()  # cells on a Ray cluster finish on threads of their own
        write_study_file(path, manifest)

    def update(self, index: int, **changes: Any) -> None:
        with self.lock:
            cells = list(self.manifest.cells)
            cells[index] = cells[index].model_copy(update=changes)
            self.manifest = self.manifest.model_copy(update={"cells": tuple(cells)})
            write_study_file(self.path, self.manifest)


def _open_study(
    axes: Sequence[Axis],
    planned: Sequence[PlannedVariant],
    plans: Sequence[CellPlan],
    baseline: str,
    cost: str,
    command: str,
    force: bool,
    search: str | None = None,
    measurement: str = SEQUENTIAL,
) -> _Study:
    path = runs_home() / study_id(axes, planned)
    created_at = time.time()
    if (path / STUDY_FILE).is_file():
        try:
            created_at = read_study(path).created_at
        except UserError:
            pass  # a broken study.json is rewritten
    cells = tuple(
        StudyCell(
            label=p.label,
            values=dict(zip([a.key for a in axes], _values_of(p.label, axes), strict=True)),
            plan=plan,
            status="not_launched" if plan.fits is False and not force else "pending",
            forced=plan.fits is False and force,
            note=f"not launched: {plan.reason} (--force launches it)"
            if plan.fits is False and not force
            else None,
        )
        for p, plan in zip(planned, plans, strict=True)
    )
    manifest = StudyManifest(
        study_id=path.name,
        created_at=created_at,
        command=command,
        axes={axis.key: list(axis.values) for axis in axes},
        baseline=baseline,
        cost=cost,  # type: ignore[arg-type]
        measurement=measurement,
        search=search,
        cells=cells,
    )
    return _Study(path, manifest)


def _values_of(label: str, axes: Sequence[Axis]) -> list[str]:
    found = next(cell for cell in cells_of(axes) if cell.label == label)
    return [found.values[axis.key] for axis in axes]


def _run_cells(
    study: _Study, planned: Sequence[PlannedVariant], options: StudyOptions, hooks: Hooks
) -> dict[str, RunRecord]:
    """Every launchable cell's run: one after another on this machine, or with --ray all at once on the
    cluster (recall_eval.api.cluster_runs: Ray decides which servers run together)."""
    from launchers.executors import open_executor

    todo: dict[str, int] = {}
    for index, cell in enumerate(study.manifest.cells):
        if cell.status == "not_launched":
            hooks.note(f"{cell.label}: not launched: {cell.plan.reason}")
        else:
            todo[cell.label] = index

    def one(label: str, own: Hooks, executor: Executor) -> RunRecord | None:
        return _run_cell(study, todo[label], planned[todo[label]], options, own, executor)

    if options.cluster.ray:
        from recall_eval.api.cluster_runs import on_cluster_at_once

        records = on_cluster_at_once(list(todo), hooks, options.cluster, one)
    else:
        with open_executor(None, None) as executor:
            records = [one(label, hooks, executor) for label in todo]
    return {label: record for label, record in zip(todo, records, strict=True) if record is not None}


def _run_cell(
    study: _Study,
    index: int,
    variant: PlannedVariant,
    options: StudyOptions,
    hooks: Hooks,
    executor: Executor,
) -> RunRecord | None:
    """One cell's run (reused, resumed or from scratch), its state written to study.json; None when it
    failed (the study goes on without it)."""
    cell = study.manifest.cells[index]
    if cell.forced:
        hooks.note(f"{cell.label}: launched with --force; the plan predicted: {cell.plan.reason}")
    try:
        record = obtain_run(variant, hooks, options.request, not options.rerun, executor=executor)
    except RunInterrupted as stop:
        study.update(index, status="interrupted", run_dir=relative_run_dir(study.path, stop.run_dir))
        raise
    except RunStopped as stop:
        study.update(
            index,
            status="failed",
            run_dir=relative_run_dir(study.path, stop.run_dir),
            note=_failed(cell, stop),
        )
        hooks.note(f"{cell.label}: failed: {stop}")
        return None
    except UserError as err:  # could not start: preflight, launch
        study.update(index, status="failed", note=_failed(cell, err))
        hooks.note(f"{cell.label}: failed: {err}")
        return None
    note = f"predicted: {cell.plan.reason}; happened: {_happened(record)}" if cell.forced else None
    study.update(
        index,
        status="finished",
        run_dir=relative_run_dir(study.path, record.path),
        reused=record.reused,
        note=note,
    )
    return record


def _search_cells(
    study: _Study,
    planned: Sequence[PlannedVariant],
    search: LengthSearch,
    options: StudyOptions,
    hooks: Hooks,
) -> dict[str, SearchRecord]:
    """--lengths search:MIN..MAX: each cell's cliff (recall_eval.api.searching), cell after cell."""
    found: dict[str, SearchRecord] = {}
    for index, (cell, variant) in enumerate(zip(study.manifest.cells, planned, strict=True)):
        if cell.status == "not_launched":
            hooks.note(f"{cell.label}: not launched: {cell.plan.reason}")
            continue
        try:
            record = run_search(variant.spec, variant.profile, search, hooks, options.request)
        except RunInterrupted:
            study.update(index, status="interrupted")
            raise
        except UserError as err:
            study.update(index, status="failed", note=_failed(cell, err))
            hooks.note(f"{cell.label}: failed: {err}")
            continue
        m = record.manifest
        study.update(
            index,
            status="finished",
            run_dir=relative_run_dir(study.path, record.path),
            cliff={"held": m.held, "fell": m.fell, "cases_spent": m.cases_spent, "grid_cases": m.grid_cases},
            note=record.lines[0].split(": ", 1)[1],
        )
        found[cell.label] = record
    return found


def _failed(cell: StudyCell, err: UserError) -> str:
    if cell.forced:
        return f"predicted: {cell.plan.reason}; happened: failed: {err}"
    return f"failed: {err}"


def _worse_lines(numbers: Any, baseline: str) -> list[str]:
    rows = numbers.cells[numbers.cells["worse"]]
    return [
        f"cell {row.cell}: recall significantly below {baseline} after Holm correction (exact McNemar, raw "
        f"p = {row.p_value:.2g}, adjusted p = {row.p_holm:.2g} < {SIGNIFICANCE:g})"
        for row in rows.itertuples()
    ]


def study(
    axes: Sequence[str],
    options: StudyOptions | None = None,
    /,
    *,
    hooks: Hooks | None = None,
    command: str | None = None,
    **fields: Any,
) -> StudyRecord:
    """Run the cross product of `axes` ("dtype=fp8,bf16", "topk=512,2048": recall_eval.study_axes) on
    identical cases and test every cell against the baseline as one family (Holm); returns the study
    directory, each cell's run and the figures as frames. Options as in `compare` (a StudyOptions, flat
    keywords, or both). Raises BadInput before anything starts for bad axes or options, UserError when the
    baseline cell did not run, RunInterrupted on Ctrl-C (study.json says where it stopped; the same call
    resumes it)."""
    options = updated(options or StudyOptions(), **fields)
    scoring = check_scoring(options.scoring)
    cost = _check_cost(options.cost)
    hooks = hooks or Hooks()
    search = parse_search(str(options.grid.lengths)) if is_search(options.grid.lengths) else None
    if search is not None and options.cluster.ray:
        # a cliff search launches each cell's servers itself, one length batch after another, on this
        # machine: refused rather than silently not placed on the cluster
        raise BadInput(
            "--lengths search: runs each cell's search on this machine and cannot place it on a Ray "
            "cluster: drop --ray, or give --lengths a list to run the cells at once on the cluster"
        )
    grid = dataclasses.replace(options.grid, lengths=str(search.high)) if search else options.grid
    spec = build_spec(grid, options.request)
    check_lengths_of(spec)
    gate = recall_gate(options.fail_under, spec.suites)
    parsed = parse_axes(list(axes))
    cells, baseline = select_cells(cells_of(parsed), options.baseline, options.only or (), options.skip or ())
    planned = [
        PlannedVariant(p.label, p.spec, p.profile, scoring)
        for p in plan_variants(
            [cell.label for cell in cells],
            spec,
            profile=options.profile,
            profiles_file=options.profiles_file,
            budget_given=options.grid.max_tokens is not None,
        )
    ]
    plans = plan_cells(planned, spec)
    base_plan = plans[[c.label for c in cells].index(baseline.label)]
    if base_plan.fits is False and not options.force:
        raise BadInput(
            f"the baseline cell {baseline.label!r} does not fit: {base_plan.reason}; pick another --baseline, "
            "or --force to launch it anyway"
        )
    secrets = request_auth(options.request).secrets()
    line = Redactor(secrets).text(
        command or shlex.join(["recall-eval", "study", *(f"--axis={a}" for a in axes)])
    )
    study_dir = _open_study(
        parsed,
        planned,
        plans,
        baseline.label,
        cost,
        line,
        options.force,
        str(options.grid.lengths) if search else None,
        ON_RAY if options.cluster.ray and search is None else SEQUENTIAL,
    )
    for cell in study_dir.manifest.cells:
        hooks.note(f"plan {cell.label}: {cell.plan.reason}")
    if search is not None:
        searches = _search_cells(study_dir, planned, search, options, hooks)
        if baseline.label not in searches:
            raise UserError(f"the baseline cell {baseline.label!r} did not run; nothing to compare with")
        return finish_search_study(study_dir.path, searches)
    runs = _run_cells(study_dir, planned, options, hooks)
    if baseline.label not in runs:
        failed = next(c for c in study_dir.manifest.cells if c.label == baseline.label)
        raise UserError(
            f"the baseline cell {baseline.label!r} did not run ({failed.note}); nothing to compare with"
        )
    return finish_study(study_dir.path, runs, gate, scoring)


def finish_study(path: Path, runs: dict[str, RunRecord], gate: Any, scoring: str) -> StudyRecord:
    """The numbers of a study whose cells ran: into study.json and study.html; the record with its verdict."""
    from recall_eval.study_stats import CellData, numbers_json, study_numbers
    from reports.study_report import render_study

    manifest = read_study(path)
    by_label = {cell.label: cell for cell in manifest.cells}
    data = [CellData(label, run.frame, _kv_bytes(run, by_label[label].plan)) for label, run in runs.items()]
    numbers = study_numbers(data, manifest.baseline, manifest.cost)
    write_study_file(path, manifest, {"rendered_at": time.time(), **numbers_json(numbers)})
    html = render_study(path)
    verdict = study_verdict(
        [(label, run.results) for label, run in runs.items()],
        _worse_lines(numbers, manifest.baseline),
        gate,
        scoring,
    )
    return StudyRecord(
        path=path,
        report=html,
        baseline=manifest.baseline,
        labels=tuple(cell.label for cell in manifest.cells),
        runs=runs,
        cells=numbers.cells,
        tests=numbers.tests,
        lengths=numbers.lengths,
        misses=numbers.misses,
        recommendation=str(numbers.recommendation["line"]),
        verdict=verdict,
    )


def load_study(path: str | Path) -> StudyRecord:
    """A stored study read back (its finished cells' runs, or searches), figures recomputed, page re-rendered."""
    from recall_eval.cliff_store import read_search

    path = Path(path)
    manifest = read_study(path)
    finished = [c for c in manifest.cells if c.status == "finished" and c.run_dir]
    if manifest.search:
        searches = {}
        for cell in finished:
            search_dir = run_dir_of(path, cell)
            assert search_dir is not None  # a finished cell has its directory
            stored = read_search(search_dir)
            if stored is not None:
                searches[cell.label] = SearchRecord(search_dir, stored)
        return finish_search_study(path, searches)
    runs = {}
    for cell in finished:
        run_dir = run_dir_of(path, cell)
        assert run_dir is not None  # a finished cell has its directory
        runs[cell.label] = RunRecord.from_store(RunStore.open(run_dir))
    return finish_study(path, runs, None, "lenient")


def finish_search_study(path: Path, searches: dict[str, SearchRecord]) -> StudyRecord:
    """A study of searched cliffs: each cell's bracket and cost (no shared lengths, so no paired tests)
    into study.json and study.html; the recommendation by cliff (recall_eval.study_stats.recommend_by_cliff)."""
    import pandas as pd

    from recall_eval.study_stats import cliff_rows, numbers_json, recommend_by_cliff
    from reports.study_report import render_study

    manifest = read_study(path)
    by_label = {cell.label: cell for cell in manifest.cells}
    frames = {label: _batches_frame(record) for label, record in searches.items()}
    rows = cliff_rows(
        {label: (r.manifest.held, r.manifest.fell) for label, r in searches.items()},
        frames,
        {label: _first_kv_bytes(searches[label], by_label[label].plan) for label in searches},
        manifest.baseline,
    )
    cells = pd.DataFrame(rows)
    costs = dict(
        zip(
            cells["cell"],
            cells[{"memory": "kv_bytes_per_token", "decode": "decode_tps", "ttft": "ttft_s"}[manifest.cost]],
            strict=True,
        )
    )
    recommendation = recommend_by_cliff(
        {label: (r.manifest.held, r.manifest.fell) for label, r in searches.items()},
        {k: (None if pd.isna(v) else float(v)) for k, v in costs.items()},
        manifest.baseline,
        manifest.cost,
    )
    from recall_eval.study_stats import StudyNumbers

    numbers = StudyNumbers(cells, pd.DataFrame(), pd.DataFrame(), pd.DataFrame(), recommendation)
    write_study_file(path, manifest, {"rendered_at": time.time(), **numbers_json(numbers)})
    html = render_study(path)
    return StudyRecord(
        path=path,
        report=html,
        baseline=manifest.baseline,
        labels=tuple(cell.label for cell in manifest.cells),
        runs={},
        cells=cells,
        tests=numbers.tests,
        lengths=numbers.lengths,
        misses=numbers.misses,
        recommendation=str(recommendation["line"]),
    )


def _batch_records(record: SearchRecord) -> list[RunRecord]:
    return [RunRecord.from_store(RunStore.open(record.path / b.run_dir)) for b in record.manifest.batches]


def _batches_frame(record: SearchRecord) -> Any:
    import pandas as pd

    frames = [run.frame for run in _batch_records(record)]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def _first_kv_bytes(record: SearchRecord, plan: CellPlan) -> float | None:
    for run in _batch_records(record)[:1]:
        return _kv_bytes(run, plan)
    return plan.kv_bytes_per_token
