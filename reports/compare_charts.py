"""Compare images as PNG bytes: the difference heatmap (B - A: recall, or mean score for a scored suite)
and per-length recall with intervals.

Drawn with matplotlib's object API (no pyplot state), in the style of reports.heatmap.
"""

from __future__ import annotations

import io

from matplotlib.cm import ScalarMappable
from matplotlib.colors import LinearSegmentedColormap, Normalize
from matplotlib.figure import Figure
from matplotlib.patches import Patch, Rectangle

from recall_eval.formatting import tokens
from reports.aggregates import CellFrame, SuiteGrid
from reports.compare_frames import DiffGrid, VariantFrame
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

# Diverging: B worse (the palette's red) -> no change (light grey) -> B better (the palette's green).
DIFF_PALETTE = (PALETTE[0], "#F3F4F6", PALETTE[2])
DIFF_CMAP = LinearSegmentedColormap.from_list("recall_diff", DIFF_PALETTE)
DIFF_NORM = Normalize(vmin=-1.0, vmax=1.0)  # fixed: the same colour means the same change in every report
# Distinct line colours for variants in the per-length chart (first = baseline).
VARIANT_COLOURS = ("#5B636E", "#2F6FDE", "#D9822B", "#8E44AD", "#16A085", "#C0392B")
MARKERS = ("o", "s", "^", "D", "v", "P")


def diff_text(value: float | None) -> str:
    """'+50 pts', '-25 pts', '0' (percentage points); '–' where there is nothing to compare."""
    if value is None:
        return "–"
    points = round(value * 100)
    return "0" if points == 0 else f"{points:+d} pts"


def score_diff_text(value: float | None) -> str:
    """A mean score difference on RULER's 0-100 scale: '+12', '-40', '0'; '–' where nothing compares."""
    if value is None:
        return "–"
    points = round(value * 100)
    return "0" if points == 0 else f"{points:+d}"


def _counts(cell: CellFrame | None, scored: bool = False) -> str:
    if cell is None:
        return "not run"
    if cell.answered:
        if scored and cell.score is not None:
            return f"{100 * cell.score:.0f}"
        return f"{cell.passes}/{cell.answered}"
    return "infra" if cell.infra else "N/A"


def _not_applicable(cell: CellFrame | None) -> bool:
    return cell is not None and cell.answered == cell.infra == 0 and cell.not_applicable > 0


def _save(fig: Figure) -> bytes:
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", metadata={"Software": None})
    return buffer.getvalue()


def diff_heatmap_png(diff: DiffGrid, grid_a: SuiteGrid, grid_b: SuiteGrid, title: str) -> bytes:
    """Recall B - A per cell (a scored suite: mean score B - A, 0-100, the small line each side's mean
    score); cells where either side has no answered case are hatched grey."""
    text = score_diff_text if diff.scored else diff_text
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
                text(value),
                ha="center",
                va="center",
                fontsize=font,
                color=colour,
                weight="bold",
            )
            note = f"{_counts(cell_a, diff.scored)} → {_counts(cell_b, diff.scored)}"
            ax.text(x, y + 0.22, note, ha="center", va="center", fontsize=font * 0.72, color=colour)
    scale = ScalarMappable(norm=DIFF_NORM, cmap=DIFF_CMAP)
    unit = "B − A, mean score (0-100)" if diff.scored else "B − A, percentage points"
    colourbar = finish_grid_axes(fig, ax, diff.lengths, diff.depths, title, scale, unit)
    colourbar.set_ticks([-1.0, -0.5, 0.0, 0.5, 1.0], labels=["−100", "−50", "0", "+50", "+100"])
    legend = [
        Patch(facecolor=INFRA_FACE, hatch="///", edgecolor=INFRA_HATCH, label="no answer on one side (infra)")
    ]
    fig.legend(handles=legend, loc="outside lower left", fontsize=7.5, frameon=False)
    return _save(fig)


def length_recall_png(variants: list[VariantFrame], lengths: list[int]) -> bytes:
    """Recall per length, one line per variant, its 95% Wilson interval as a light bar (log length axis).

    With a few cases per length the intervals are wide: they are drawn light and thin so that they do not
    hide the lines. Variants are drawn apart (small offsets, distinct markers, the baseline hollow) so that equal
    recall does not hide one series under another; markers at recall 1.0 stay clear of the top edge.
    """
    fig = Figure(figsize=(7.2, 3.4), dpi=110, layout="constrained")
    ax = fig.add_subplot()
    n = len(variants)
    for index, frame in enumerate(variants):
        rows = [
            frame.lengths[n_]
            for n_ in lengths
            if n_ in frame.lengths and frame.lengths[n_].recall is not None
        ]
        offset = 1.0 + 0.04 * (index - (n - 1) / 2)
        xs = [row.target_tokens * offset for row in rows]
        ys = [row.recall for row in rows]
        colour = VARIANT_COLOURS[index % len(VARIANT_COLOURS)]
        # Intervals as thin, light whiskers: the points and lines carry the reading, not the bars.
        ax.vlines(xs, [row.ci_low for row in rows], [row.ci_high for row in rows], color=colour, alpha=0.35,
                  linewidth=2.5, zorder=2)  # fmt: skip
        ax.plot(xs, ys, color=colour, linewidth=1.6, linestyle="--" if index == 0 else "-",
                marker=MARKERS[index % len(MARKERS)], markersize=6,
                markerfacecolor="white" if index == 0 else colour, markeredgewidth=1.4,
                label=f"{frame.label} (baseline)" if index == 0 else frame.label, clip_on=False, zorder=3 + index)  # fmt: skip
    ax.set_xscale("log")
    ax.set_xticks(lengths, [tokens(v) for v in lengths], rotation=30, ha="right")
    ax.minorticks_off()
    if lengths:
        ax.set_xlim(min(lengths) / 1.15, max(lengths) * 1.15)
    ax.set_ylim(-0.04, 1.06)
    ax.set_yticks([0, 0.25, 0.5, 0.75, 1.0], ["0%", "25%", "50%", "75%", "100%"])
    ax.set_ylabel("recall")
    ax.set_xlabel("context length (tokens)")
    ax.grid(axis="y", color="#E3E6EA", linewidth=0.8)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    ax.legend(fontsize=8, frameon=False, loc="upper center", bbox_to_anchor=(0.5, 1.14), ncols=min(n, 4))
    return _save(fig)
