"""The report of a `--suite ruler,mrcr` run in real headless Chromium at 1400 and 1000 px: nothing
overflows the page sideways (MRCR's long expected answers used to push the "Lowest scores" answer column
off-screen), RULER's 11 tasks are small heatmaps side by side under one caption (not 11 full-width
figures with 11 long captions), and an interrupted run says how many cases of how many planned it covers.
Screenshots go to $REPORT_SCREENSHOTS when set (for a person to look at)."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from recall_eval.store import RunStore
from recall_eval.types import Completion, Profile, Result, Run, RunSpec
from reports.html import render_report
from suites.registry import REGISTRY
from tests.reports.dom import parse
from tests.reports.test_browser import chromium

pytestmark = pytest.mark.browser

LENGTHS = (4096, 8192, 16384, 32768)
TASKS = REGISTRY.families()["ruler"] + REGISTRY.families()["mrcr"]
# an MRCR answer is a whole generated passage: long, with few spaces to break at
MRCR_EXPECTED = "9f3a1c-" + "the-lighthouse-keeper-wrote-a-riddle-about-the-tide-and-the-moon-" * 8
OVERFLOW_PROBE = """<script>
window.addEventListener('load', () => {
  const width = document.documentElement.clientWidth;
  const over = [];
  for (const el of document.querySelectorAll('main, section, header, table, figure, img, pre, p, h2, h3, .cards')) {
    const box = el.getBoundingClientRect();
    if (box.width > 0 && box.right > width + 1) over.push(`${el.tagName.toLowerCase()}#${el.id}.${el.className} right=${Math.round(box.right)}`);
  }
  const answers = Array.from(document.querySelectorAll('#lowest-scores td.answer')).map(
    (td) => Math.round(td.getBoundingClientRect().right));
  document.documentElement.setAttribute('data-widths', JSON.stringify(
    {width, scrollWidth: document.documentElement.scrollWidth, over, answers}));
});
</script>"""


def _results(tasks: tuple[str, ...] = TASKS) -> list[Result]:
    results = []
    for task in tasks:
        scored = task not in ("niah_single_1",)  # RULER scores every task; one pass/miss for the mix
        for index, length in enumerate(LENGTHS):
            for depth in (0.0, 50.0, 100.0) if task.startswith("niah") else (50.0,):
                score = max(0.0, 1.0 - 0.2 * index - depth / 500)
                expected = (MRCR_EXPECTED,) if task.startswith("mrcr") else ("7731920", "4410982")
                answer = (MRCR_EXPECTED[: int(len(MRCR_EXPECTED) * score)] + " and then something else") * 2
                outcome = "pass" if score == 1.0 else "miss"
                results.append(
                    Result(
                        case_id=f"{task}-{length}-{depth:g}",
                        suite=task,
                        variant="default",
                        outcome=outcome,
                        target_tokens=length,
                        depth_percent=depth,
                        prompt_tokens=length,
                        expected=expected,
                        answer=answer,
                        score=score if scored else None,
                        started_at=0.0,
                        finished_at=1.0,
                        completion=Completion(
                            text=answer,
                            finish_reason="stop",
                            prompt_tokens=length,
                            completion_tokens=40,
                            ttft_s=0.4,
                            itl_s=(0.02,) * 39,
                        ),
                        params=({"task": task, "metric": "string_match_all"} if scored else {})
                        | ({} if task.startswith("niah") else {"grid": "lengths"}),
                    )  # fmt: skip
                )
    return results


def _wide_run(
    root: Path, status: str = "finished", keep: int | None = None, tasks: tuple[str, ...] = TASKS
) -> Path:
    results = _results(tasks)
    spec = RunSpec(suites=tasks, lengths=LENGTHS, depths=(0.0, 50.0, 100.0), trials=1)
    run = Run(
        run_id=f"ruler-mrcr-{status}", spec=spec, status=status, created_at=1_700_000_000.0,
        profile=Profile(name="reference", engine="reference", index_k_dtype="fp8"),
        cases_planned=len(results), note="stopped by Ctrl-C" if status == "interrupted" else None,
    )  # fmt: skip
    store = RunStore.create(run, root)
    for result in results[:keep]:
        store.append_result(result)
    render_report(store.path)
    return store.path


def _widths(report: Path, tmp_path: Path, width: int) -> dict:
    probed = tmp_path / f"probed-{width}.html"
    probed.write_text(report.read_text(encoding="utf-8").replace("</body>", OVERFLOW_PROBE + "</body>"))
    dom = chromium(tmp_path, f"--window-size={width},2000", "--dump-dom", probed.as_uri())
    return json.loads(parse(dom).find_all("html")[0].attrs["data-widths"])


def _screenshot(report: Path, tmp_path: Path, width: int, name: str) -> None:
    shot = tmp_path / f"{name}-{width}.png"
    chromium(tmp_path, f"--window-size={width},5200", f"--screenshot={shot}", report.as_uri())
    assert shot.stat().st_size > 10_000
    folder = os.environ.get("REPORT_SCREENSHOTS")
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        shutil.copy(shot, Path(folder) / shot.name)


@pytest.mark.parametrize("width", [1400, 1000])
def test_a_ruler_and_mrcr_report_fits_the_window(tmp_path, width):
    """No element sticks out of the window and the page does not scroll sideways; every answer cell of
    "Lowest scores" ends inside the window."""
    report = _wide_run(tmp_path / "runs") / "report.html"
    widths = _widths(report, tmp_path, width)
    assert widths["over"] == [], widths["over"]
    assert widths["scrollWidth"] <= widths["width"], widths
    assert widths["answers"] and max(widths["answers"]) <= widths["width"], widths
    _screenshot(report, tmp_path, width, "ruler-mrcr-report")


def test_many_suites_share_one_caption_and_an_interrupted_run_says_of_how_many(tmp_path):
    report = _wide_run(tmp_path / "runs", status="interrupted", keep=60) / "report.html"
    doc = parse(report.read_text(encoding="utf-8"))
    grid = doc.by_id("heatmap-grid")
    shown = [section.attrs["data-suite"] for section in grid.find_all("section")]
    assert set(shown) <= set(TASKS) and len(shown) >= 11
    assert doc.find_all("figcaption") == []  # one caption for the group, not one per heatmap
    caption = doc.by_id("heatmap-caption").text
    assert "recall (passes / answered) or mean score" in caption, caption
    banner = doc.by_id("status-banner").text
    assert doc.by_id("cases-stored").text == "60" and doc.by_id("cases-planned").text == str(len(_results()))
    assert "interrupted" in banner and "planned" in banner
    _screenshot(report, tmp_path, 1400, "interrupted-report")


def test_an_interrupted_pass_miss_runs_cases_card_says_of_how_many_planned(tmp_path):
    report = (
        _wide_run(tmp_path / "runs", status="interrupted", keep=5, tasks=("niah_single_1",)) / "report.html"
    )
    doc = parse(report.read_text(encoding="utf-8"))
    assert doc.by_id("summary-cases").attrs["data-cases"] == "5"
    assert doc.by_id("summary-planned").text == "of 12 planned"
