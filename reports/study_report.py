"""The study page: study.html (self-contained: images inline) from study.json alone (its manifest and
the numbers the library computed with recall_eval.study_stats). Also the files pareto.png and
curves.png beside it, for pasting into chats."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

from recall_eval.formatting import format_p
from recall_eval.store import write_atomically
from recall_eval.study_store import STUDY_FILE, STUDY_HTML, read_study
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


def render_study(study_dir: Path) -> Path:
    """Write study.html (and pareto.png, curves.png) from study.json; returns the html's path."""
    study_dir = Path(study_dir)
    manifest = read_study(study_dir)
    document = json.loads((study_dir / STUDY_FILE).read_text(encoding="utf-8"))
    numbers = document.get("numbers") or {"cells": [], "tests": [], "lengths": [], "misses": []}
    recommendation = document.get("recommendation") or {}
    cells, lengths = numbers["cells"], numbers["lengths"]
    pareto = (
        pareto_png(cells, _longest(lengths), manifest.cost, recommendation.get("cell")) if cells else None
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
