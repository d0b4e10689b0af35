"""The study page: study.html (self-contained: images inline) from study.json alone (its manifest and
the numbers the library computed with recall_eval.study_stats). Also the files pareto.png and
curves.png beside it, for pasting into chats."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

from recall_eval.cliff_store import read_search
from recall_eval.formatting import format_p
from recall_eval.stats import wilson_interval
from recall_eval.store import write_atomically
from recall_eval.study_store import STUDY_FILE, STUDY_HTML, StudyManifest, read_study, run_dir_of
from reports.html import environment
from reports.study_charts import COST_AXIS, curves_png, pareto_png


def _png_uri(png: bytes) -> str:
    return "data:image/png;base64," + base64.b64encode(png).decode("ascii")


def _ms(seconds: float | None) -> str:
    """Seconds as whole milliseconds ('760'), so that a TTFT and its interval fit one narrow column."""
    return "–" if seconds is None else f"{seconds * 1000:,.0f}"


def _longest(lengths: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Each cell's row at the longest tested length."""
    if not lengths:
        return {}
    top = max(row["length"] for row in lengths)
    return {row["cell"]: row for row in lengths if row["length"] == top}


def _searched_lengths(study_dir: Path, manifest: StudyManifest) -> list[dict[str, Any]]:
    """Each searched cell's lengths (search.json) as rows of the per-length table: recall with its Wilson interval."""
    rows = []
    for cell in manifest.cells:
        search_dir = run_dir_of(study_dir, cell)
        stored = read_search(search_dir) if search_dir is not None else None
        for entry in stored.lengths if stored else []:
            bounds = wilson_interval(entry["passes"], entry["answered"]) if entry["answered"] else None
            rows.append(
                {
                    "cell": cell.label,
                    "length": entry["length"],
                    "recall": entry["recall"],
                    "ci_low": bounds[0] if bounds else None,
                    "ci_high": bounds[1] if bounds else None,
                    "passes": entry["passes"],
                    "answered": entry["answered"],
                }
            )
    return rows


def render_study(study_dir: Path) -> Path:
    """Write study.html (and pareto.png, curves.png) from study.json; returns the html's path."""
    study_dir = Path(study_dir)
    manifest = read_study(study_dir)
    document = json.loads((study_dir / STUDY_FILE).read_text(encoding="utf-8"))
    numbers = document.get("numbers") or {"cells": [], "tests": [], "lengths": [], "misses": []}
    recommendation = document.get("recommendation") or {}
    cells, lengths = numbers["cells"], numbers["lengths"]
    if manifest.search:  # searched cliffs: the cliff against the cost; each search's lengths as the curves
        lengths = _searched_lengths(study_dir, manifest)
        ys = {c["cell"]: (c["cliff_held"], None, None) for c in cells if c.get("cliff_held") is not None}
        y_label, log_y = "cliff: last length that held (tokens)", True
    else:
        longest = _longest(lengths)
        ys = {
            cell: (row["recall"], row["ci_low"], row["ci_high"])
            for cell, row in longest.items()
            if row["recall"] is not None
        }
        top = max((row["length"] for row in lengths), default=None)
        y_label, log_y = (f"recall at {top:,}" if top else "recall"), False
    pareto = (
        pareto_png(cells, ys, y_label, manifest.cost, recommendation.get("cell"), log_y) if cells else None
    )
    curves = curves_png(cells, lengths) if cells else None
    for name, png in (("pareto.png", pareto), ("curves.png", curves)):
        if png is not None:
            write_atomically(study_dir / name, png)
    env = environment()
    env.filters.update(p_value=format_p, ms=_ms)
    tested = sorted({row["length"] for row in lengths})
    by_cell_length = {(row["cell"], row["length"]): row for row in lengths}
    tests = {(row["cell"], row["scope"]): row for row in numbers["tests"]}
    page = env.get_template("study.html.j2").render(
        manifest=manifest,
        cells=cells,
        by_label={c["cell"]: c for c in cells},
        tests=tests,
        scopes=list(dict.fromkeys(row["scope"] for row in numbers["tests"])),
        tested=tested,
        by_cell_length=by_cell_length,
        misses=numbers["misses"],
        recommendation=recommendation,
        correction=document.get("correction", ""),
        pareto=_png_uri(pareto) if pareto else None,
        curves=_png_uri(curves) if curves else None,
        cost_label=COST_AXIS[manifest.cost][3],
    )
    html = study_dir / STUDY_HTML
    write_atomically(html, page.encode("utf-8"))
    return html
