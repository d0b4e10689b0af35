"""A compare directory's stored format: compare.json names the compared runs under their labels (the
manifest, versioned by format_version) and holds the numbers the report computed from them. Beside the
run store because the library writes and lists compares and the CI gate reads them; reports/ computes
the numbers and renders compare.html, and hands the document here to be written.

    runs/compare-<id>/compare.json          manifest + numbers (machine-readable)
    runs/compare-<id>/compare.html          the report (reports/compare_report.py)
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from recall_eval.errors import UserError
from recall_eval.store import read_versioned, write_atomically

COMPARE_FILE = "compare.json"
COMPARE_HTML = "compare.html"
COMPARE_FORMAT = 1


class CompareVariant(BaseModel):
    # a field a newer recall-eval wrote is kept and written back (recall_eval.types' stored models)
    model_config = ConfigDict(frozen=True, extra="allow")

    label: str  # the variant as the user wrote it
    run_dir: str  # the run directory, relative to the compare directory where possible
    reused: bool = False  # an earlier finished run with the identical spec was reused
    reused_age_s: float | None = None  # reused: seconds from that run's end to this compare's run


class CompareManifest(BaseModel):
    """What a compare is: its variants' runs, in order (the first is the baseline)."""

    # compare.json also holds the numbers (recomputed on every render) and maybe fields of a newer
    # recall-eval: all kept as extra fields, written back unless the render replaces them
    model_config = ConfigDict(frozen=True, extra="allow")

    format_version: int = COMPARE_FORMAT
    compare_id: str
    created_at: float
    command: str | None = None  # the command line that made it, for the report header
    variants: tuple[CompareVariant, ...]
    # True when the variants' requests were interleaved on live servers at the same time; False (the
    # default) for runs made one after another, whose speeds are not tested as paired samples
    interleaved: bool = False
    # the headline verdict of the compare report and its gates: "lenient" or "strict" (recall_eval.scoring)
    scoring: str = "lenient"


def stored_run_dir(manifest_dir: Path, stored: str) -> Path:
    """A run directory as a manifest (compare.json, study.json) stores it, relative to the manifest's
    own directory or absolute, as a path."""
    path = Path(stored)
    return path if path.is_absolute() else Path(manifest_dir) / path


def run_dir_of(compare_dir: Path, variant: CompareVariant) -> Path:
    return stored_run_dir(compare_dir, variant.run_dir)


def relative_run_dir(manifest_dir: Path, run_dir: Path) -> str:
    """run_dir as a manifest (compare.json, study.json) stores it: relative to the manifest's directory
    (both usually sit in runs/)."""
    try:
        return os.path.relpath(Path(run_dir).resolve(), Path(manifest_dir).resolve())
    except ValueError:  # another drive on Windows
        return str(Path(run_dir).resolve())


def write_compare_file(compare_dir: Path, manifest: CompareManifest, extra: dict[str, Any]) -> Path:
    """compare.json, atomically: the manifest, then `extra` (the rendered numbers and conclusion)."""
    document = {**manifest.model_dump(mode="json"), **extra}
    path = Path(compare_dir) / COMPARE_FILE
    write_atomically(path, json.dumps(document, indent=2).encode("utf-8"))
    return path


def read_manifest(compare_dir: Path) -> CompareManifest:
    path = Path(compare_dir) / COMPARE_FILE
    if not path.is_file():
        raise UserError(
            f"{compare_dir} is not a compare directory (no {COMPARE_FILE}); run `recall-eval compare`"
        )
    return read_versioned(path, CompareManifest, COMPARE_FORMAT, "compare file")
