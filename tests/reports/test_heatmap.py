"""reports.heatmap: cell colours read back from the rendered pixels, cell texts, PNG determinism."""

from __future__ import annotations

import io

import numpy as np
import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.colors import to_rgb
from PIL import Image

from recall_eval.types import Outcome, Result
from reports import aggregates
from reports.heatmap import (
    EMPTY_FACE,
    INFRA_FACE,
    INFRA_HATCH,
    PALETTE,
    RECALL_CMAP,
    cell_text,
    heatmap_figure,
    heatmap_png,
)


def make(outcome: Outcome, length: int, depth: float, trial: int = 0) -> Result:
    return Result(
        case_id=f"{length}-{depth}-{trial}",
        suite="needle",
        variant="default",
        outcome=outcome,
        target_tokens=length,
        depth_percent=depth,
        trial=trial,
        started_at=0.0,
        finished_at=1.0,
    )


RESULTS = [
    make("pass", 1000, 0.0, 0),
    make("pass", 1000, 0.0, 1),
    make("miss", 2000, 0.0, 0),
    make("empty", 2000, 0.0, 1),
    make("oom", 4000, 0.0, 0),
    make("oom", 4000, 0.0, 1),
    make("pass", 1000, 50.0, 0),
    make("miss", 1000, 50.0, 1),
    make("pass", 2000, 50.0, 0),
    make("too_long", 2000, 50.0, 1),
]
GRID = aggregates.suite_grid(RESULTS, "needle", lengths=(1000, 2000, 4000), depths=(0.0, 50.0, 100.0))


class Rendered:
    """The GRID heatmap drawn once; cells read back as pixels."""

    def __init__(self) -> None:
        self.fig = heatmap_figure(GRID, "t")
        canvas = FigureCanvasAgg(self.fig)
        canvas.draw()
        self.image = np.asarray(canvas.buffer_rgba())[..., :3].astype(float) / 255

    def cell(self, x: int, y: int) -> np.ndarray:
        """RGB pixels of the left part of cell (x, y): away from the centred text and the corner flag."""
        height = self.image.shape[0]
        transform = self.fig.axes[0].transData.transform
        (left, top), (right, bottom) = transform([(x - 0.42, y - 0.4), (x - 0.3, y + 0.4)])
        rows = slice(int(height - top) + 1, int(height - bottom) - 1)
        return self.image[rows, int(left) + 1 : int(right) - 1].reshape(-1, 3)


@pytest.fixture(scope="module")
def drawn() -> Rendered:
    return Rendered()


def _close(pixels: np.ndarray, colour: str, tol: float = 0.03) -> float:
    """Share of pixels within tol of colour."""
    return float(np.mean(np.all(np.abs(pixels - np.array(to_rgb(colour))) < tol, axis=1)))


def test_palette_runs_through_the_three_colours_on_a_fixed_scale() -> None:
    for value, colour in zip((0.0, 0.5, 1.0), PALETTE, strict=True):
        assert np.allclose(RECALL_CMAP(value)[:3], to_rgb(colour), atol=0.01)


def test_cells_are_coloured_by_recall_and_infra_cells_are_grey_not_red(drawn: Rendered) -> None:
    assert _close(drawn.cell(0, 0), PALETTE[2]) > 0.95  # 2/2 -> green
    assert _close(drawn.cell(1, 0), PALETTE[0]) > 0.95  # 0/2 -> red
    assert _close(drawn.cell(0, 1), PALETTE[1]) > 0.95  # 1/2 -> amber
    assert _close(drawn.cell(1, 1), PALETTE[2]) > 0.95  # 1/1 answered (+1 too long) -> green
    infra = drawn.cell(2, 0)  # 2 OOM, no answer
    assert _close(infra, PALETTE[0], tol=0.15) == 0.0
    assert _close(infra, INFRA_FACE) > 0.4  # grey face between the hatch lines
    assert _close(infra, INFRA_HATCH, tol=0.08) > 0.05  # and the hatch lines themselves
    assert np.mean(np.ptp(infra, axis=1)) < 0.05  # every pixel is a grey (r = g = b), hatch included
    not_run = drawn.cell(0, 2)
    assert _close(not_run, EMPTY_FACE) > 0.95


def test_cell_texts() -> None:
    row0, row50, row100 = GRID.cells
    assert cell_text(row0[0]) == ("2/2", "")
    assert cell_text(row0[2]) == ("OOM", "2 cases")
    assert cell_text(row50[1]) == ("1/1", "+1 too long")
    assert cell_text(row100[0]) == ("–", "not run")
    mixed = aggregates.suite_grid([make("oom", 1, 0), make("crash", 1, 0, 1), make("oom", 1, 0, 2)], "needle")
    assert cell_text(mixed.cells[0][0]) == ("OOM/crash", "3 cases")


def test_png_is_deterministic_and_sized_to_the_grid() -> None:
    first, second = heatmap_png(GRID, "needle"), heatmap_png(GRID, "needle")
    assert first == second
    assert first.startswith(b"\x89PNG\r\n\x1a\n")
    small = Image.open(io.BytesIO(first))
    big_grid = aggregates.suite_grid(
        RESULTS, "needle", lengths=tuple(range(1000, 13000, 1000)), depths=(0.0, 50.0)
    )
    big = Image.open(io.BytesIO(heatmap_png(big_grid, "needle")))
    assert big.width > small.width and small.width > 300 and small.height > 200


def test_not_applicable_cell_reads_n_a_on_white() -> None:
    grid = aggregates.suite_grid([make("not_applicable", 338, 0), make("pass", 1000, 0)], "needle")
    assert cell_text(grid.cells[0][0]) == ("N/A", "prompt does not fit")
    texts = [t.get_text() for t in heatmap_figure(grid, "needle").legends[0].get_texts()]
    assert any(text.startswith("N/A") for text in texts), texts
