"""The report in a real headless Chromium: heatmap rendered, numbers as in results.jsonl, no script run.

Chromium runs once per check with --dump-dom (the DOM after the load event) or --screenshot.
A copy of the report gets a small probe script that records, at load, what the browser made of the
images; the report itself has no scripts.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path

import numpy as np
import pytest
from matplotlib.colors import to_rgb
from PIL import Image

from recall_eval.stats import wilson_interval
from reports.heatmap import INFRA_FACE, PALETTE
from reports.html import render_report
from tests import prerequisites
from tests.reports.dom import parse
from tests.reports.sample_run import SCRIPT_ANSWER, build_sample_run
from tests.reports.test_html import raw_results

pytestmark = pytest.mark.browser

CHROMIUM = prerequisites.chromium_path()
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
    "--window-size=1300,2400",
)
PROBE = """<script>
window.addEventListener('load', () => {
  const images = Array.from(document.images).map((img) => {
    const box = img.getBoundingClientRect();
    const style = getComputedStyle(img);
    return {id: img.id, complete: img.complete, naturalWidth: img.naturalWidth, width: box.width,
            height: box.height, visible: style.visibility === 'visible' && style.display !== 'none'};
  });
  document.documentElement.setAttribute('data-probe', JSON.stringify(images));
});
</script>"""


def chromium(tmp: Path, *args: str) -> str:
    """Run headless Chromium in its own process group; returns stdout. Stopped by group on timeout."""
    if CHROMIUM is None:
        prerequisites.missing("browser", "chromium is not installed (apt-get install -y chromium)")
    profile = tmp / f"chromium-profile-{len(list(tmp.glob('chromium-profile-*')))}"
    argv = [CHROMIUM, *FLAGS, f"--user-data-dir={profile}", *args]
    proc = subprocess.Popen(
        argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True, text=True
    )
    try:
        out, err = proc.communicate(timeout=90)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        raise
    assert proc.returncode == 0, f"chromium exited {proc.returncode}: {err[-2000:]}"
    return out


def with_probe(report: Path, target: Path) -> Path:
    target.write_text(
        report.read_text(encoding="utf-8").replace("</body>", PROBE + "</body>"), encoding="utf-8"
    )
    return target


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    run_dir = build_sample_run(tmp_path_factory.mktemp("runs"))
    render_report(run_dir)
    return run_dir


def test_heatmap_visible_and_numbers_match_results(run_dir: Path, tmp_path: Path) -> None:
    page = with_probe(run_dir / "report.html", tmp_path / "probe.html")
    dom = parse(chromium(tmp_path, "--dump-dom", page.as_uri()))
    html = dom.find_all("html")[0]
    images = json.loads(html.attrs["data-probe"])
    assert [img["id"] for img in images] == ["heatmap-needle"]
    (heatmap,) = images
    assert heatmap["complete"] and heatmap["naturalWidth"] > 300, heatmap
    assert heatmap["width"] > 300 and heatmap["height"] > 200 and heatmap["visible"], heatmap

    rows = raw_results(run_dir)
    passes = sum(r["outcome"] == "pass" for r in rows)
    answered = sum(r["outcome"] in ("pass", "miss", "empty", "truncated") for r in rows)
    card = dom.by_id("summary-recall")
    assert (int(card.attrs["data-passes"]), int(card.attrs["data-answered"])) == (passes, answered)
    low, high = wilson_interval(passes, answered)
    shown = f"{100 * passes / answered:.1f}%"
    assert shown in card.text and f"{100 * low:.1f}%–{100 * high:.1f}%" in card.text
    assert f"{passes} passed of {answered} answered" in card.text
    for row in dom.find_all("tr", cls="outcome-count"):
        outcome = row.attrs["data-outcome"]
        assert int(row.attrs["data-count"]) == sum(r["outcome"] == outcome for r in rows), outcome


def test_script_in_an_answer_is_text_and_does_not_run(run_dir: Path, tmp_path: Path) -> None:
    page = with_probe(run_dir / "report.html", tmp_path / "probe.html")
    dom = parse(chromium(tmp_path, "--dump-dom", page.as_uri()))
    body = dom.find_all("body")[0]
    assert "data-pwned" not in body.attrs
    assert len(dom.find_all("script")) == 1  # only the probe
    answers = [cell.text.strip() for cell in dom.find_all("td", cls="answer")]
    assert SCRIPT_ANSWER in answers
    assert dom.find_all("title")[0].text != "pwned"


def test_the_escape_check_catches_an_unescaped_answer(run_dir: Path, tmp_path: Path) -> None:
    """Control: the same page with the answer spliced in raw does run it, so the check above can fail."""
    html = (run_dir / "report.html").read_text(encoding="utf-8")
    escaped = SCRIPT_ANSWER.replace("<", "&lt;").replace(">", "&gt;").replace("'", "&#39;")
    assert escaped in html
    control = tmp_path / "control.html"
    control.write_text(html.replace(escaped, SCRIPT_ANSWER), encoding="utf-8")
    dom = parse(chromium(tmp_path, "--dump-dom", control.as_uri()))
    assert dom.find_all("body")[0].attrs.get("data-pwned") == "yes"


def test_screenshot_shows_the_heatmap(run_dir: Path, tmp_path: Path) -> None:
    shot = tmp_path / "report.png"
    chromium(tmp_path, f"--screenshot={shot}", (run_dir / "report.html").as_uri())
    pixels = np.asarray(Image.open(shot).convert("RGB")).reshape(-1, 3).astype(float) / 255

    def count(colour: str) -> int:
        return int(np.sum(np.all(np.abs(pixels - np.array(to_rgb(colour))) < 0.03, axis=1)))

    # The sample run's heatmap has 16 green cells, 2 red, 1 amber and 5 grey hatched ones.
    assert count(PALETTE[2]) > 20_000
    assert count(PALETTE[0]) > 2_000
    assert count(INFRA_FACE) > 5_000
    print(f"screenshot: {shot}")


LAYOUT_PROBE = """<script>
window.addEventListener('load', () => {
  const spill = [];
  for (const table of document.querySelectorAll('.meta-grid table')) {
    const column = table.parentElement.getBoundingClientRect();
    const box = table.getBoundingClientRect();
    if (box.right > column.right + 0.5) spill.push({table: table.id, over: box.right - column.right});
    for (const cell of table.querySelectorAll('td, th')) {
      if (cell.scrollWidth > cell.clientWidth + 1) spill.push({table: table.id, cell: cell.textContent.slice(0, 40)});
    }
  }
  document.documentElement.setAttribute('data-layout', JSON.stringify(spill));
});
</script>"""


def test_metadata_tables_stay_in_their_columns_at_1400px(tmp_path: Path) -> None:
    """A 64-character prompts digest (the reuse key) breaks inside its cell instead of running under
    the next column of the metadata grid."""
    from recall_eval.store import RunStore

    run_dir = build_sample_run(tmp_path / "runs")
    store = RunStore.open(run_dir)
    versions = {**store.run.versions, "prompts": "9f" * 32, "suite:needle": "1"}
    store.write_run(store.run.model_copy(update={"versions": versions}))
    render_report(run_dir)
    page = tmp_path / "layout.html"
    page.write_text(
        (run_dir / "report.html").read_text(encoding="utf-8").replace("</body>", LAYOUT_PROBE + "</body>"),
        encoding="utf-8",
    )
    dom = parse(chromium(tmp_path, "--window-size=1400,2400", "--dump-dom", page.as_uri()))
    assert "9f" * 32 in dom.by_id("versions-table").text
    assert json.loads(dom.find_all("html")[0].attrs["data-layout"]) == []
