"""Compare images as PNG bytes: the difference heatmap (B - A) and per-length recall with intervals.

Drawn with matplotlib's object API (no pyplot state), in the style of reports.heatmap.
"""

from __future__ import annotations

import io

from matplotlib.cm import ScalarMappable
from matplotlib.colors import LinearSegmentedColormap, Normalize
from matplotlib.figure import Figure
from matplotlib.patches import Patch, Rectangle

from reports.compare_frames import DiffGrid, VariantFrame
from reports.frames import CellFrame, SuiteGrid
from reports.heatmap import (
    EMPTY_FACE,
    INFRA_FACE,
    INFRA_HATCH,
    MUTED,
    PALETTE,
    TEXT,
    finish_grid_axes,
    grid_figure,
)
from reports.labels import tokens

# Diverging: B worse (the palette's red) -> no change (light grey) -> B better (the palette's green).
DIFF_PALETTE = (PALETTE[0], "#F3F4F6", PALETTE[2])
DIFF_CMAP = LinearSegmentedColormap.from_list("recall_diff", DIFF_PALETTE)
DIFF_NORM = Normalize(vmin=-1.0, vmax=1.0)  # fixed: the same colour means the same change in every report
# Distinct line colours for variants in the per-length chart (first = baseline).
VARIANT_COLOURS = ("#5B636E", "#2F6FDE", "#D9822B", "#8E44AD", "#16A085", "#C0392B")


def diff_text(value: float | None) -> str:
    """'+50 pts', '-25 pts', '0' (percentage points); '–' where there is nothing to compare."""
    if value is None:
        return "–"
    points = round(value * 100)
    return "0" if points == 0 else f"{points:+d} pts"


def _counts(cell: CellFrame | None) -> str:
    if cell is None:
        return "not run"
    if cell.answered:
        return f"{cell.passes}/{cell.answered}"
    return "infra" if cell.infra else "N/A"


def _not_applicable(cell: CellFrame | None) -> bool:
    return cell is not None and cell.answered == cell.infra == 0 and cell.not_applicable > 0


def _save(fig: Figure) -> bytes:
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", metadata={"Software": None})
    return buffer.getvalue()


def diff_heatmap_png(diff: DiffGrid, grid_a: SuiteGrid, grid_b: SuiteGrid, title: str) -> bytes:
    """Recall B - A per cell; cells where either side has no answered case are hatched grey."""
    fig, ax, font = grid_figure(diff.lengths, diff.depths)
    for y, row in enumerate(diff.values):
        for x, value in enumerate(row):
            cell_a, cell_b = grid_a.cells[y][x], grid_b.cells[y][x]
            if value is None:
                missing = cell_a is None or cell_b is None
                unfit = _not_applicable(cell_a) and _not_applicable(cell_b)
                face, hatch = (EMPTY_FACE, None) if missing or unfit else (INFRA_FACE, "///")
            else:
                face, hatch = DIFF_CMAP(DIFF_NORM(value)), None
            ax.add_patch(
                Rectangle(
                    (x - 0.5, y - 0.5), 1, 1, facecolor=face, edgecolor="white", hatch=hatch,
                    hatchcolor=INFRA_HATCH, linewidth=1.5,
                )
            )  # fmt: skip
            colour = TEXT if value is not None else MUTED
            ax.text(
                x,
                y - 0.12,
                diff_text(value),
                ha="center",
                va="center",
                fontsize=font,
                color=colour,
                weight="bold",
            )
            note = f"{_counts(cell_a)} → {_counts(cell_b)}"
            ax.text(x, y + 0.22, note, ha="center", va="center", fontsize=font * 0.72, color=colour)
    scale = ScalarMappable(norm=DIFF_NORM, cmap=DIFF_CMAP)
    finish_grid_axes(fig, ax, diff.lengths, diff.depths, title, scale, "recall difference (B − A)")
    legend = [
        Patch(facecolor=INFRA_FACE, hatch="///", edgecolor=INFRA_HATCH, label="no answer on one side (infra)")
    ]
    fig.legend(handles=legend, loc="outside lower left", fontsize=7.5, frameon=False)
    return _save(fig)


def length_recall_png(variants: list[VariantFrame], lengths: list[int]) -> bytes:
    """Recall per length with 95% Wilson intervals, one line per variant (log-scaled length axis)."""
    fig = Figure(figsize=(7.2, 3.6), dpi=110, layout="constrained")
    ax = fig.add_subplot()
    n = len(variants)
    for index, frame in enumerate(variants):
        xs, ys, low, high = [], [], [], []
        for length in lengths:
            stat = frame.lengths.get(length)
            if stat is None or stat.recall is None:
                continue
            ci_low, ci_high = frame.length_ci[length]
            # Small multiplicative offsets keep overlapping intervals apart on the log axis.
            xs.append(length * (1.0 + 0.025 * (index - (n - 1) / 2)))
            ys.append(stat.recall)
            low.append(max(0.0, stat.recall - ci_low))  # clamp float noise at recall 0 or 1
            high.append(max(0.0, ci_high - stat.recall))
        colour = VARIANT_COLOURS[index % len(VARIANT_COLOURS)]
        ax.errorbar(xs, ys, yerr=[low, high], label=frame.label, color=colour, marker="o", markersize=4,
                    capsize=3, linewidth=1.4)  # fmt: skip
    ax.set_xscale("log")
    ax.set_xticks(lengths, [tokens(v) for v in lengths], rotation=30, ha="right")
    ax.minorticks_off()
    ax.set_ylim(-0.03, 1.03)
    ax.set_ylabel("recall (95% Wilson interval)")
    ax.set_xlabel("context length (tokens)")
    ax.grid(axis="y", color="#E3E6EA", linewidth=0.8)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    ax.legend(fontsize=8, frameon=False, loc="lower left")
    return _save(fig)
