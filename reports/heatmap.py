"""Recall heatmaps (depth x length) as PNG bytes, drawn with matplotlib's object API (no pyplot state)."""

from __future__ import annotations

import io
from collections.abc import Sequence

from matplotlib.axes import Axes
from matplotlib.cm import ScalarMappable
from matplotlib.colorbar import Colorbar
from matplotlib.colors import LinearSegmentedColormap, Normalize
from matplotlib.figure import Figure
from matplotlib.patches import Patch, Polygon, Rectangle

from recall_eval.formatting import tokens
from recall_eval.types import Outcome
from reports.aggregates import CellFrame, SuiteGrid
from reports.labels import OUTCOME_LABELS

PALETTE = ("#F0496E", "#EBB839", "#0CD79F")  # recall 0 -> 0.5 -> 1
RECALL_CMAP = LinearSegmentedColormap.from_list("recall", PALETTE)
RECALL_NORM = Normalize(vmin=0.0, vmax=1.0)  # fixed: the same colour means the same recall in every report
INFRA_FACE = "#C9CDD2"
INFRA_HATCH = "#7D838B"
EMPTY_FACE = "#F3F4F6"  # light, so the grid of a partly run sweep stays visible
NOT_APPLICABLE_FACE = "#FFFFFF"  # the suite cannot build a prompt this short: nothing to measure
TEXT = "#1B1F24"
MUTED = "#5B636E"


def infra_label(outcomes: tuple[Outcome, ...]) -> str:
    """'OOM', 'too long', or 'OOM/crash' when a cell holds several infrastructure outcomes."""
    return "/".join(OUTCOME_LABELS[o] for o in outcomes)


def cell_text(cell: CellFrame | None) -> tuple[str, str]:
    """(main line, note line) written in a cell; also used for the HTML table twin of the image."""
    if cell is None:
        return ("–", "not run")
    if cell.answered == 0 and cell.infra == 0 and cell.not_applicable:
        return ("N/A", "prompt does not fit")
    if cell.answered == 0:
        return (infra_label(cell.infra_outcomes), f"{cell.infra} case{'s' if cell.infra != 1 else ''}")
    note = f"+{cell.infra} {infra_label(cell.infra_outcomes)}" if cell.infra else ""
    if cell.score is not None:  # a scored suite: the mean score (0-100, as RULER writes it), n answered
        return (f"{100 * cell.score:.0f}", note or f"n={cell.answered}")
    return (f"{cell.passes}/{cell.answered}", note)


def _add_hatched(ax: Axes, corners: list[tuple[float, float]]) -> None:
    """Grey with grey hatching. The hatch takes the edge colour (the way every matplotlib >= 3.8 does it)."""
    ax.add_patch(Polygon(corners, facecolor=INFRA_FACE, linewidth=0))
    ax.add_patch(Polygon(corners, facecolor="none", edgecolor=INFRA_HATCH, hatch="///", linewidth=0))


def _draw_cell(ax: Axes, x: int, y: int, cell: CellFrame | None, font: float) -> None:
    main, note = cell_text(cell)
    if cell is None:
        face, hatch, colour = EMPTY_FACE, None, MUTED
    elif cell.answered == 0 and cell.infra == 0:
        face, hatch, colour = NOT_APPLICABLE_FACE, None, MUTED
    elif cell.answered == 0:
        face, hatch, colour = INFRA_FACE, "///", TEXT
    else:
        value = cell.score if cell.score is not None else cell.recall
        face, hatch, colour = RECALL_CMAP(RECALL_NORM(value)), None, TEXT
    left, top, right, bottom = x - 0.5, y - 0.5, x + 0.5, y + 0.5
    ax.add_patch(Rectangle((left, top), 1, 1, facecolor=face, linewidth=0))
    if hatch:
        _add_hatched(ax, [(left, top), (right, top), (right, bottom), (left, bottom)])
    if cell is not None and cell.answered and cell.infra:
        # A hatched corner flags the cases without an answer, on top of the recall colour of the rest.
        _add_hatched(ax, [(x + 0.12, top), (right, top), (right, y - 0.12)])
    ax.add_patch(Rectangle((left, top), 1, 1, facecolor="none", edgecolor="white", linewidth=1.5))
    # Text sits on a small plate of the cell colour so hatching never runs through the letters.
    plate = {"facecolor": face, "edgecolor": "none", "pad": 1.0} if hatch else None
    if note:
        ax.text(
            x,
            y - 0.12,
            main,
            ha="center",
            va="center",
            fontsize=font,
            color=colour,
            weight="bold",
            bbox=plate,
        )
        ax.text(x, y + 0.22, note, ha="center", va="center", fontsize=font * 0.72, color=colour, bbox=plate)
    else:
        ax.text(x, y, main, ha="center", va="center", fontsize=font, color=colour, weight="bold", bbox=plate)


def grid_figure(lengths: Sequence[int], depths: Sequence[float]) -> tuple[Figure, Axes, float]:
    """A figure sized for a length x depth grid, its axes and the font size for cell texts."""
    n_x, n_y = max(len(lengths), 1), max(len(depths), 1)
    fig = Figure(figsize=(2.6 + 0.95 * n_x, 1.9 + 0.46 * n_y), dpi=110, layout="constrained")
    return fig, fig.add_subplot(), 8.5 if n_x <= 10 else 7.0


def finish_grid_axes(
    fig: Figure,
    ax: Axes,
    lengths: Sequence[int],
    depths: Sequence[float],
    title: str,
    scale: ScalarMappable,
    scale_label: str,
) -> Colorbar:
    """Limits, ticks, labels, title and colour bar of a length x depth grid (recall or difference)."""
    n_x, n_y = max(len(lengths), 1), max(len(depths), 1)
    ax.set_xlim(-0.5, n_x - 0.5)
    ax.set_ylim(n_y - 0.5, -0.5)  # depth 0 (start of the context) at the top
    ax.set_xticks(range(len(lengths)), [tokens(v) for v in lengths], rotation=30, ha="right")
    ax.set_yticks(range(len(depths)), [f"{d:g}%" for d in depths])
    ax.tick_params(length=0, labelsize=8)
    for spine in ax.spines.values():
        spine.set_visible(False)
    ax.set_xlabel("context length (tokens)")
    ax.set_ylabel("needle depth")
    ax.set_title(title, fontsize=10, loc="left")
    colourbar = fig.colorbar(scale, ax=ax, fraction=0.04, pad=0.02)
    colourbar.set_label(scale_label, fontsize=8)
    colourbar.ax.tick_params(labelsize=7)
    return colourbar


def heatmap_figure(grid: SuiteGrid, title: str) -> Figure:
    fig, ax, font = grid_figure(grid.lengths, grid.depths)
    for y, row in enumerate(grid.cells):
        for x, cell in enumerate(row):
            _draw_cell(ax, x, y, cell, font)
    scale = ScalarMappable(norm=RECALL_NORM, cmap=RECALL_CMAP)
    scored = any(cell is not None and cell.score is not None for row in grid.cells for cell in row)
    label = "mean score (metric, 0-1)" if scored else "recall (passes / answered)"
    finish_grid_axes(fig, ax, grid.lengths, grid.depths, title, scale, label)
    legend = [
        Patch(
            facecolor=INFRA_FACE, hatch="///", edgecolor=INFRA_HATCH, label="infrastructure only (not a miss)"
        ),
    ]
    if any(cell is None for row in grid.cells for cell in row):
        legend.append(Patch(facecolor=EMPTY_FACE, edgecolor=MUTED, label="not run"))
    if any(cell is not None and cell.answered == cell.infra == 0 for row in grid.cells for cell in row):
        legend.append(
            Patch(facecolor=NOT_APPLICABLE_FACE, edgecolor=MUTED, label="N/A: the suite's prompt is longer")
        )
    fig.legend(handles=legend, loc="outside lower left", fontsize=7.5, frameon=False, ncols=len(legend))
    return fig


def heatmap_png(grid: SuiteGrid, title: str) -> bytes:
    """The heatmap as PNG bytes; identical inputs give identical bytes (no timestamps in metadata)."""
    buffer = io.BytesIO()
    heatmap_figure(grid, title).savefig(buffer, format="png", metadata={"Software": None})
    return buffer.getvalue()
