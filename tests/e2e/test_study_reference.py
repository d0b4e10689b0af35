"""`recall-eval study` on the real reference engine: a 2 x 2 study (dtype=fp8,bf16 x topk=4,64) on needle and
config, interrupted with Ctrl-C in its second cell and run again (nothing lost, nothing run twice), study.json
holding each cell's plan, results, raw and Holm p, speed and memory with intervals and the recommendation,
the page in Chromium; and a cell the planner says does not fit, not launched (then launched with --force,
the prediction kept beside what happened).

The checks are about completeness and structure, never about recall values: the reference engine's answers
depend on its training.
"""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path

import pytest

from recall_eval import api
from recall_eval.store import runs_home
from tests.e2e.cli import run_cli, start_cli
from tests.reports.dom import parse
from tests.reports.test_browser import chromium

pytestmark = [pytest.mark.slow]

# fmt: off
GRID = ["--suite", "needle,config", "--lengths", "256,512", "--depths", "50", "--trials", "1", "--max-tokens", "24"]
# fmt: on
CASES = 2 * 2 * 1 * 1  # suites x lengths x depths x trials
AXES = ["--axis", "dtype=fp8,bf16", "--axis", "topk=4,64", "--baseline", "dtype=bf16,topk=64"]
LABELS = ["dtype=fp8,topk=4", "dtype=fp8,topk=64", "dtype=bf16,topk=4", "dtype=bf16,topk=64"]
OVERFLOW_PROBE = """<script>
window.addEventListener('load', () => {
  const images = Array.from(document.images).map((img) => ({id: img.closest('figure').id,
    complete: img.complete, naturalWidth: img.naturalWidth, width: img.getBoundingClientRect().width}));
  document.documentElement.setAttribute('data-probe', JSON.stringify({
    images, scrollWidth: document.documentElement.scrollWidth, innerWidth: window.innerWidth}));
});
</script>"""


def case_ids(run_dir: Path) -> list[str]:
    return [json.loads(line)["case_id"] for line in (run_dir / "results.jsonl").read_text().splitlines()]


def study_dirs() -> list[Path]:
    return sorted(runs_home().glob("study-*"))


def run_dirs() -> set[Path]:
    return {p for p in runs_home().iterdir() if (p / "run.json").is_file()}


def interrupt_in_second_cell() -> tuple[int, str]:
    """Start the study; once the first cell is finished and the second has stored a result, Ctrl-C."""
    process = start_cli("study", *AXES, *GRID)
    deadline = time.monotonic() + 400
    try:
        while time.monotonic() < deadline and process.poll() is None:
            done = [d for d in study_dirs() if (d / "study.json").is_file()]
            if done:
                study = json.loads((done[0] / "study.json").read_text())
                finished = [c for c in study["cells"] if c["status"] == "finished"]
                first_run = (done[0] / finished[0]["run_dir"]).resolve() if finished else None
                others = [
                    d for d in run_dirs() if d.resolve() != first_run and (d / "results.jsonl").is_file()
                ]
                if finished and any(case_ids(d) for d in others):
                    break
            time.sleep(0.05)
        process.send_signal(signal.SIGINT)
        output, _ = process.communicate(timeout=120)
    finally:
        if process.poll() is None:
            process.kill()
    return process.returncode, output


def test_two_by_two_study_interrupted_resumed_and_its_page() -> None:
    code, output = interrupt_in_second_cell()
    assert code == 130, output[-3000:]
    assert "rerun the same study to resume it" in output
    (study_dir,) = study_dirs()
    stopped = json.loads((study_dir / "study.json").read_text())
    assert [c["status"] for c in stopped["cells"]] == ["finished", "interrupted", "pending", "pending"]
    before = {d: case_ids(d) for d in run_dirs()}
    assert sorted(len(ids) for ids in before.values())[-1] == CASES and 0 < min(
        len(i) for i in before.values()
    )

    done = run_cli("study", *AXES, *GRID, timeout=900)
    assert done.returncode in (0, 3), done.stderr[-3000:]
    assert f"{LABELS[0]}: reusing run" in done.stderr and f"{LABELS[1]}: resuming run" in done.stderr
    html = Path(done.stdout.strip().splitlines()[-1])
    assert html == study_dir / "study.html"
    study = json.loads((study_dir / "study.json").read_text())
    assert [c["label"] for c in study["cells"]] == LABELS and study["baseline"] == LABELS[3]
    assert all(c["status"] == "finished" for c in study["cells"])
    # Nothing lost, nothing run twice: the interrupted run kept its stored cases (the same lines first) and
    # every run holds each case exactly once, the same case ids in every cell.
    dirs = [(study_dir / c["run_dir"]).resolve() for c in study["cells"]]
    assert set(dirs) == {d.resolve() for d in run_dirs()}
    for run_dir in dirs:
        ids = case_ids(run_dir)
        assert len(ids) == len(set(ids)) == CASES
        kept = before.get(run_dir, [])
        assert ids[: len(kept)] == kept
    assert len({frozenset(case_ids(d)) for d in dirs}) == 1
    assert study["cells"][0]["reused"] and not study["cells"][1]["reused"]

    # Each cell's plan, and the server's pool as it came up: predicted bytes per token = reported ones.
    for cell, run_dir in zip(study["cells"], dirs, strict=True):
        plan = cell["plan"]
        assert plan["fits"] is True and plan["kv_slots"] > 512 and plan["max_sequences"] >= 1
        info = json.loads((run_dir / "run.json").read_text())["server_info"]
        assert plan["kv_bytes_per_token"] == info["kv_bytes_per_token"]
        assert (
            info["index_k_dtype"] == cell["values"]["dtype"]
            and str(info["index_topk"]) == cell["values"]["topk"]
        )
    rows = {row["cell"]: row for row in study["numbers"]["cells"]}
    assert set(rows) == set(LABELS) and rows[LABELS[3]]["baseline"]
    assert rows[LABELS[3]]["p_value"] is None
    for label in LABELS[:3]:
        row = rows[label]
        assert 0 <= row["p_value"] <= row["p_holm"] <= 1
        assert row["answered"] + row["infra"] == CASES
        assert row["ttft_low"] <= row["ttft_s"] <= row["ttft_high"]
        assert row["decode_low"] <= row["decode_tps"] <= row["decode_high"]
    assert (
        rows[LABELS[2]]["kv_bytes_per_token"] > rows[LABELS[0]]["kv_bytes_per_token"]
    )  # bf16 keys cost more
    families = {t["family"] for t in study["numbers"]["tests"]}
    assert families == {"pooled", "suite", "length"}
    assert "Holm" in study["correction"] and "sequential" in study["measurement"]
    line = study["recommendation"]["line"]
    assert line.startswith(("recommend ", "no cell restores recall at lengths >= ")) and line in done.stderr
    worse = [label for label, row in rows.items() if row["worse"]]
    assert (done.returncode == 4) == bool(worse)

    # The page in Chromium at 1000 px: both charts decode, the table lists every cell, nothing overflows.
    page = study_dir / "probe.html"
    page.write_text(html.read_text().replace("</body>", OVERFLOW_PROBE + "</body>"))
    dom = parse(chromium(study_dir, "--window-size=1000,2400", "--dump-dom", page.as_uri()))
    probe = json.loads(dom.find_all("html")[0].attrs["data-probe"])
    assert probe["scrollWidth"] <= probe["innerWidth"], probe
    assert [i["id"] for i in probe["images"]] == ["pareto", "curves"]
    assert all(i["complete"] and i["naturalWidth"] > 300 and i["width"] > 300 for i in probe["images"])
    assert [r.attrs["data-label"] for r in dom.find_all("tr", cls="cell-row")] == LABELS
    assert dom.by_id("recommendation").text.strip() == line

    # Run again: every cell reused, nothing launched, the same numbers.
    again = run_cli("study", *AXES, *GRID, timeout=300)
    assert again.returncode == done.returncode and again.stderr.count("reusing run") == 4
    assert json.loads((study_dir / "study.json").read_text())["numbers"] == study["numbers"]
    loaded = api.load_study(study_dir)  # read back from the runs alone: the same figures
    assert loaded.recommendation == line and list(loaded.cells["cell"]) == LABELS
    assert loaded.cells.set_index("cell").loc[LABELS[0], "p_holm"] == rows[LABELS[0]]["p_holm"]
    assert run_cli("report", str(study_dir)).stdout.strip() == str(html)  # `report` re-renders a study


def test_a_cell_that_does_not_fit_is_not_launched_unless_forced() -> None:
    axes = ["--axis", "ctx=300,2048", "--baseline", "ctx=2048"]
    done = run_cli("study", *axes, *GRID, timeout=600)
    assert done.returncode in (0, 3), done.stderr[-3000:]
    study = json.loads((Path(done.stdout.strip().splitlines()[-1]).parent / "study.json").read_text())
    small, large = study["cells"]
    assert small["status"] == "not_launched" and small["run_dir"] is None
    assert small["plan"]["fits"] is False and "512-token prompt does not fit" in small["plan"]["reason"]
    assert "not launched" in small["note"] and "--force" in small["note"]
    assert large["status"] == "finished" and large["plan"]["fits"] is True
    assert len(run_dirs()) == 1  # one server launched, one run
    assert [row["cell"] for row in study["numbers"]["cells"]] == ["ctx=2048"]

    forced = run_cli("study", *axes, *GRID, "--force", timeout=600)
    assert forced.returncode in (0, 3, 4), forced.stderr[-3000:]
    study = json.loads((Path(forced.stdout.strip().splitlines()[-1]).parent / "study.json").read_text())
    small = study["cells"][0]
    assert small["forced"] and small["status"] in ("finished", "failed")
    assert (
        small["note"].startswith("predicted: a 512-token prompt does not fit")
        and "; happened: " in small["note"]
    )
    assert "ctx=2048: reusing run" in forced.stderr
