"""A study directory's stored format: study.json names each cell of the axes' cross product, its
memory plan (predicted before launch), its run and what happened, plus the numbers computed from the
runs (recall_eval.study_stats) and the recommendation. Versioned by format_version, beside
compare_store.py; reports/ renders study.html from it.

    runs/study-<id>/study.json      manifest + plans + numbers (machine-readable)
    runs/study-<id>/study.html      the study page (reports/study_report.py)

study.json is rewritten (atomically) after every cell, so an interrupted study shows which cells
finished; the runs themselves are ordinary run directories, resumed or reused by the next run of the
same study.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from recall_eval.compare_store import stored_run_dir
from recall_eval.errors import UserError
from recall_eval.store import read_versioned, write_atomically

STUDY_FILE = "study.json"
STUDY_HTML = "study.html"
STUDY_FORMAT = 1

CellStatus = Literal["pending", "not_launched", "finished", "failed", "interrupted"]
Cost = Literal["memory", "decode", "ttft"]
COSTS: tuple[str, ...] = ("memory", "decode", "ttft")


class CellPlan(BaseModel):
    """What the memory planner predicts for a cell before anything launches (launchers.cell_plan)."""

    model_config = ConfigDict(frozen=True, extra="allow")  # fields it does not know are kept

    fits: bool | None  # None: this kind of server is not planned (launched, nothing predicted)
    reason: str  # one line: why it fits, why not, or why it was not planned
    kv_slots: int | None = None  # KV pool capacity in tokens
    kv_bytes_per_token: float | None = None  # pool bytes per token at the cell's index-key precision
    sequence_tokens: int  # the longest request: longest prompt + answer budget, in server tokens
    max_sequences: int | None = None  # sequences of sequence_tokens that fit in the pool at once
    source: str = ""  # what the plan was computed from (a config.json, the bundled weights)


class StudyCell(BaseModel):
    model_config = ConfigDict(frozen=True, extra="allow")  # fields it does not know are kept

    label: str  # the compare variant the cell is ("dtype=fp8,topk=512")
    values: dict[str, str]  # axis -> value
    plan: CellPlan
    status: CellStatus = "pending"
    forced: bool = False  # launched with --force although the plan said it does not fit
    run_dir: str | None = None  # relative to the study directory where possible
    reused: bool = False  # an earlier finished run with the same reuse key was used as it is
    note: str | None = None  # why not launched, how it failed; for a forced cell, predicted vs happened
    # --lengths search:MIN..MAX: the cell's cliff (held, fell, cases_spent, grid_cases); run_dir is its search dir
    cliff: dict[str, int | None] | None = None


class StudyManifest(BaseModel):
    """What a study is: its axes, cells (in order), baseline and cost; study.json also holds the numbers."""

    model_config = ConfigDict(frozen=True, extra="allow")  # fields it does not know are kept

    format_version: int = STUDY_FORMAT
    study_id: str
    created_at: float
    command: str | None = None
    axes: dict[str, list[str]]  # axis -> its values, in order
    baseline: str  # the baseline cell's label
    cost: Cost = "memory"  # what "cheapest" means in the recommendation
    # how the cells' speeds were measured: launched servers run one after another on the same machine
    measurement: str = "sequential"
    search: str | None = (
        None  # the --lengths search:MIN..MAX[:BUDGET] spec, when the cells' cliffs were searched
    )
    cells: tuple[StudyCell, ...]


def run_dir_of(study_dir: Path, cell: StudyCell) -> Path | None:
    """A cell's run (or search) directory, None before it has one."""
    return None if cell.run_dir is None else stored_run_dir(study_dir, cell.run_dir)


def write_study_file(study_dir: Path, manifest: StudyManifest, extra: dict[str, Any] | None = None) -> Path:
    """study.json, atomically: the manifest, then `extra` (numbers, recommendation)."""
    document = {**manifest.model_dump(mode="json"), **(extra or {})}
    path = Path(study_dir) / STUDY_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomically(path, json.dumps(document, indent=2).encode("utf-8"))
    return path


def read_study(study_dir: Path) -> StudyManifest:
    path = Path(study_dir) / STUDY_FILE
    if not path.is_file():
        raise UserError(f"{study_dir} is not a study directory (no {STUDY_FILE}); run `recall-eval study`")
    return read_versioned(path, StudyManifest, STUDY_FORMAT, "study file")
