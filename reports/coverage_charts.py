"""Indexer coverage in reports: a heatmap (indexer layer x length) for passes and for misses, and the
share of misses by cause (selection / generation) per length. Built from Result.coverage only.

"Misses" here are answered cases that did not pass (miss, empty, truncated): the ones that get a cause.
The rule itself lives in recall_eval/indexer_coverage.py; the report states it next to the table.
"""

from __future__ import annotations

import base64
import io
from collections.abc import Sequence
from dataclasses import dataclass

import pandas as pd
from matplotlib.axes import Axes
from matplotlib.cm import ScalarMappable
from matplotlib.colors import Normalize
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

from recall_eval.formatting import tokens
from recall_eval.indexer_coverage import NON_PASS_ANSWERS, SELECTED_SHARE
from recall_eval.types import Result
from reports.heatmap import EMPTY_FACE, MUTED, RECALL_CMAP, TEXT

COVERAGE_NORM = Normalize(vmin=0.0, vmax=1.0)
GROUPS = ("pass", "miss")  # heatmap panels: passes, and answered non-passes


@dataclass(frozen=True)
class CoverageGrid:
    """Mean coverage share per (indexer layer, length) over one group of cases; None where it has none."""

    group: str  # "pass" or "miss"
    lengths: tuple[int, ...]
    n_layers: int
    cells: tuple[tuple[float | None, ...], ...]  # cells[layer][length index]
    counts: tuple[int, ...]  # cases per length


@dataclass(frozen=True)
class CauseRow:
    """Misses at one length, by cause."""

    target_tokens: int
    misses: int  # answered non-passes
    covered: int  # ... with coverage (and so a cause)
    selection: int
    generation: int

    @property
    def selection_share(self) -> float | None:
        return self.selection / self.covered if self.covered else None

    @property
    def generation_share(self) -> float | None:
        return self.generation / self.covered if self.covered else None


@dataclass(frozen=True)
class CoverageView:
    """The coverage section of a report."""

    cases: int  # results with coverage
    n_layers: int
    grids: tuple[CoverageGrid, ...]  # passes, misses
    causes: tuple[CauseRow, ...]
    png: bytes
    selected_share: float = SELECTED_SHARE

    @property
    def png_data_uri(self) -> str:
        return "data:image/png;base64," + base64.b64encode(self.png).decode("ascii")

    @property
    def totals(self) -> CauseRow:
        return CauseRow(
            target_tokens=0,
            misses=sum(r.misses for r in self.causes),
            covered=sum(r.covered for r in self.causes),
            selection=sum(r.selection for r in self.causes),
            generation=sum(r.generation for r in self.causes),
        )


def _coverage_table(results: Sequence[Result]) -> pd.DataFrame:
    """One row per (case with coverage, indexer layer): group (pass / miss / None), length, layer, share."""
    rows = [
        (_group(r.outcome), r.target_tokens, layer, share)
        for r in results
        if r.coverage is not None
        for layer, share in enumerate(r.coverage.layers)
    ]
    return pd.DataFrame(rows, columns=["group", "target_tokens", "layer", "share"])


def _group(outcome: str) -> str | None:
    if outcome == "pass":
        return "pass"
    return "miss" if outcome in NON_PASS_ANSWERS else None


def coverage_grid(
    results: Sequence[Result], group: str, lengths: tuple[int, ...], n_layers: int
) -> CoverageGrid:
    members = [r for r in results if r.coverage is not None and _group(r.outcome) == group]
    table = _coverage_table(members)
    table = table[table["layer"] < n_layers]
    means = table.pivot_table(index="layer", columns="target_tokens", values="share", aggfunc="mean")
    means = means.reindex(index=range(n_layers), columns=list(lengths))
    counts = pd.Series([r.target_tokens for r in members], dtype="int64").value_counts()
    cells = tuple(tuple(None if pd.isna(v) else float(v) for v in row) for row in means.to_numpy())
    return CoverageGrid(
        group=group,
        lengths=lengths,
        n_layers=n_layers,
        cells=cells,
        counts=tuple(int(counts.get(n, 0)) for n in lengths),
    )


def cause_rows(results: Sequence[Result]) -> tuple[CauseRow, ...]:
    """Misses (answered non-passes) per length: how many, how many with coverage, and their causes."""
    misses = pd.DataFrame(
        [
            (r.target_tokens, r.coverage is not None, r.coverage.cause if r.coverage else None)
            for r in results
            if _group(r.outcome) == "miss"
        ],
        columns=["target_tokens", "covered", "cause"],
    )
    grouped = misses.assign(
        selection=misses["cause"] == "selection", generation=misses["cause"] == "generation", misses=1
    ).groupby("target_tokens")[["misses", "covered", "selection", "generation"]]
    return tuple(
        CauseRow(target_tokens=int(length), **{k: int(v) for k, v in row.items()})
        for length, row in grouped.sum().iterrows()
    )


def _draw_panel(ax: Axes, grid: CoverageGrid, title: str) -> None:
    font = 7.5 if len(grid.lengths) <= 10 else 6.0
    show_text = grid.n_layers <= 24
    for layer, row in enumerate(grid.cells):
        for x, value in enumerate(row):
            face = EMPTY_FACE if value is None else RECALL_CMAP(COVERAGE_NORM(value))
            ax.add_patch(
                Rectangle((x - 0.5, layer - 0.5), 1, 1, facecolor=face, edgecolor="white", linewidth=1.0)
            )
            if show_text and value is not None:
                ax.text(x, layer, f"{value:.2f}", ha="center", va="center", fontsize=font, color=TEXT)
    ax.set_xlim(-0.5, max(len(grid.lengths), 1) - 0.5)
    ax.set_ylim(grid.n_layers - 0.5, -0.5)
    labels = [f"{tokens(n)}\nn={c}" for n, c in zip(grid.lengths, grid.counts, strict=True)]
    ax.set_xticks(range(len(grid.lengths)), labels, fontsize=7)
    step = max(1, grid.n_layers // 16)
    ax.set_yticks(range(0, grid.n_layers, step), [str(i) for i in range(0, grid.n_layers, step)], fontsize=7)
    ax.tick_params(length=0)
    for spine in ax.spines.values():
        spine.set_visible(False)
    ax.set_xlabel("context length (tokens), cases", fontsize=8)
    ax.set_ylabel("indexer layer", fontsize=8)
    ax.set_title(title, fontsize=9, loc="left", color=TEXT if any(grid.counts) else MUTED)
    if not any(grid.counts):
        ax.text(
            (len(grid.lengths) - 1) / 2,
            (grid.n_layers - 1) / 2,
            "no cases",
            ha="center",
            va="center",
            color=MUTED,
        )


def coverage_png(grids: Sequence[CoverageGrid], title: str) -> bytes:
    """Passes and misses side by side; identical inputs give identical bytes."""
    n_x = max((len(g.lengths) for g in grids), default=1)
    n_y = max((g.n_layers for g in grids), default=1)
    fig = Figure(
        figsize=(2.0 + 2 * (0.75 * n_x + 0.8), 1.8 + min(0.3 * n_y, 9.0)), dpi=110, layout="constrained"
    )
    axes = fig.subplots(1, len(grids), squeeze=False)[0]
    names = {"pass": "passes", "miss": "misses (answered, not passed)"}
    for ax, grid in zip(axes, grids, strict=True):
        _draw_panel(ax, grid, f"{names[grid.group]}: {sum(grid.counts)} cases")
    fig.suptitle(title, fontsize=10, x=0.01, ha="left")
    bar = fig.colorbar(ScalarMappable(norm=COVERAGE_NORM, cmap=RECALL_CMAP), ax=list(axes), fraction=0.03)
    bar.set_label("coverage: share of answer positions", fontsize=7.5)
    bar.ax.tick_params(labelsize=7)
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", metadata={"Software": None})
    return buffer.getvalue()


def coverage_view(results: Sequence[Result], title: str = "indexer coverage") -> CoverageView | None:
    """The coverage section, or None when no result carries coverage (a run without --capture-indexer)."""
    covered = [r for r in results if r.coverage is not None]
    if not covered:
        return None
    n_layers = max(len(r.coverage.layers) for r in covered if r.coverage is not None)
    lengths = tuple(sorted({r.target_tokens for r in covered}))
    grids = tuple(coverage_grid(covered, group, lengths, n_layers) for group in GROUPS)
    return CoverageView(
        cases=len(covered),
        n_layers=n_layers,
        grids=grids,
        causes=cause_rows(results),
        png=coverage_png(grids, title),
    )


def coverage_numbers(results: Sequence[Result]) -> dict[str, object] | None:
    """Misses by cause per length, for compare.json; None without coverage."""
    if not any(r.coverage is not None for r in results):
        return None
    return {
        "selected_share": SELECTED_SHARE,
        "by_length": [
            {
                "length": row.target_tokens,
                "misses": row.misses,
                "with_coverage": row.covered,
                "selection": row.selection,
                "generation": row.generation,
            }
            for row in cause_rows(results)
        ],
    }
