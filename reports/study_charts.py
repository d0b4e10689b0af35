"""Study images as PNG bytes, from study.json's numbers: the Pareto chart (recall at the longest length
against the chosen cost) and every cell's recall per length on one plot.

Drawn with matplotlib's object API (no pyplot state), in the style of reports.compare_charts.
"""

from __future__ import annotations

import io
from typing import Any

from matplotlib.figure import Figure

from recall_eval.formatting import tokens
from reports.compare_charts import MARKERS, VARIANT_COLOURS

COST_AXIS = {
    "memory": ("kv_bytes_per_token", None, None, "KV bytes per token (lower is cheaper)", 1.0),
    "decode": ("decode_tps", "decode_low", "decode_high", "median decode tok/s (higher is cheaper)", 1.0),
    "ttft": ("ttft_s", "ttft_low", "ttft_high", "median TTFT, ms (lower is cheaper)", 1000.0),
}


def _save(fig: Figure) -> bytes:
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png")
    return buffer.getvalue()


def _style(ax: Any) -> None:
    ax.grid(color="#E3E6EA", linewidth=0.8)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)


def frontier(points: list[tuple[str, float, float]], higher_cost_better: bool) -> list[str]:
    """Cells no other cell beats on both recall and cost (the Pareto front), cheapest first."""

    def beats(a: tuple[str, float, float], b: tuple[str, float, float]) -> bool:
        cheaper_or_same = a[1] >= b[1] if higher_cost_better else a[1] <= b[1]
        strictly = (a[1] != b[1]) or (a[2] > b[2])
        return cheaper_or_same and a[2] >= b[2] and strictly

    front = [p for p in points if not any(beats(q, p) for q in points if q is not p)]
    return [p[0] for p in sorted(front, key=lambda p: p[1], reverse=higher_cost_better)]


def pareto_png(
    cells: list[dict[str, Any]],
    ys: dict[str, tuple[float, float | None, float | None]],
    y_label: str,
    cost: str,
    recommended: str | None,
    log_y: bool = False,
) -> bytes:
    """Each cell's figure of merit (`ys`: recall at the longest length with its Wilson interval, or the
    searched cliff) against the cost (its bootstrap interval as a horizontal whisker for speeds); the
    Pareto front as a dotted line; the baseline hollow, the recommended cell ringed; cells at one point
    nested, the earlier larger."""
    column, low, high, label, scale = COST_AXIS[cost]
    fig = Figure(figsize=(7.2, 3.6), dpi=110, layout="constrained")
    ax = fig.add_subplot()
    points = []
    # cells at the same point are drawn nested (earlier ones larger), so that none hides another
    spots = [
        (cell[column], ys[cell["cell"]][0]) if cell.get(column) is not None and cell["cell"] in ys else None
        for cell in cells
    ]
    for index, cell in enumerate(cells):
        found = ys.get(cell["cell"])
        if cell.get(column) is None or found is None:
            continue
        x, (y, y_low, y_high) = cell[column] * scale, found
        points.append((cell["cell"], x, y))
        colour = VARIANT_COLOURS[index % len(VARIANT_COLOURS)]
        if y_low is not None and y_high is not None:
            ax.vlines([x], [y_low], [y_high], color=colour, alpha=0.35, linewidth=2.5)
        if low and cell.get(low) is not None and cell.get(high) is not None:
            ax.hlines([y], [cell[low] * scale], [cell[high] * scale], color=colour, alpha=0.35, linewidth=2.5)
        later = sum(spot == spots[index] for spot in spots[index + 1 :])
        ax.plot([x], [y], marker=MARKERS[index % len(MARKERS)], markersize=8 + 5 * later, color=colour,
                markerfacecolor="white" if cell["baseline"] else colour, markeredgewidth=1.5, linestyle="none",
                label=f"{cell['cell']} (baseline)" if cell["baseline"] else cell["cell"], clip_on=False)  # fmt: skip
        if cell["cell"] == recommended:
            ax.plot([x], [y], marker="o", markersize=17, markerfacecolor="none", markeredgecolor="#0B8A66",
                    markeredgewidth=2, linestyle="none", label="recommended")  # fmt: skip
    front = frontier(points, cost == "decode")
    where = {name: (x, y) for name, x, y in points}
    if len(front) > 1:
        ax.plot([where[n][0] for n in front], [where[n][1] for n in front], color="#9AA1AA", linestyle=":", linewidth=1.2,
                label="Pareto front", zorder=1)  # fmt: skip
    if log_y:
        ax.set_yscale("log")
    else:
        ax.set_ylim(-0.04, 1.06)
        ax.set_yticks([0, 0.25, 0.5, 0.75, 1.0], ["0%", "25%", "50%", "75%", "100%"])
    ax.set_ylabel(y_label)
    ax.set_xlabel(label)
    ax.margins(x=0.15)
    _style(ax)
    ax.legend(fontsize=7.5, frameon=False, loc="center left", bbox_to_anchor=(1.01, 0.5))
    return _save(fig)


def curves_png(cells: list[dict[str, Any]], lengths: list[dict[str, Any]]) -> bytes:
    """Recall per length, one line per cell (the baseline dashed and hollow), Wilson intervals as light
    whiskers, on a log length axis; cells drawn slightly apart so that equal recall hides none."""
    fig = Figure(figsize=(7.2, 3.6), dpi=110, layout="constrained")
    ax = fig.add_subplot()
    all_lengths = sorted({row["length"] for row in lengths})
    n = len(cells)
    for index, cell in enumerate(cells):
        rows = [r for r in lengths if r["cell"] == cell["cell"] and r.get("recall") is not None]
        rows.sort(key=lambda r: r["length"])
        offset = 1.0 + 0.03 * (index - (n - 1) / 2)
        xs = [r["length"] * offset for r in rows]
        colour = VARIANT_COLOURS[index % len(VARIANT_COLOURS)]
        ax.vlines(
            xs,
            [r["ci_low"] for r in rows],
            [r["ci_high"] for r in rows],
            color=colour,
            alpha=0.3,
            linewidth=2.5,
        )
        ax.plot(xs, [r["recall"] for r in rows], color=colour, linewidth=1.6,
                linestyle="--" if cell["baseline"] else "-", marker=MARKERS[index % len(MARKERS)], markersize=6,
                markerfacecolor="white" if cell["baseline"] else colour, markeredgewidth=1.4,
                label=f"{cell['cell']} (baseline)" if cell["baseline"] else cell["cell"], clip_on=False)  # fmt: skip
    ax.set_xscale("log")
    if all_lengths:
        ax.set_xticks(all_lengths, [tokens(v) for v in all_lengths], rotation=30, ha="right")
        ax.minorticks_off()
        ax.set_xlim(min(all_lengths) / 1.2, max(all_lengths) * 1.2)
    ax.set_ylim(-0.04, 1.06)
    ax.set_yticks([0, 0.25, 0.5, 0.75, 1.0], ["0%", "25%", "50%", "75%", "100%"])
    ax.set_ylabel("recall")
    ax.set_xlabel("context length (server tokens)")
    _style(ax)
    ax.legend(fontsize=7.5, frameon=False, loc="center left", bbox_to_anchor=(1.01, 0.5))
    return _save(fig)
