"""A run (or compare) that mixes pass/miss suites with scored ones says score where it shows scores: the
heatmap heading and colour scale, a "Lowest scores" table instead of calling partial credit a failure, and
"pass/miss suites pooled" where recall pools several pass/miss suites beside the scored ones."""

from __future__ import annotations

from recall_eval.compare_store import CompareManifest, CompareVariant, relative_run_dir
from recall_eval.types import Completion, Result
from reports.compare_report import write_compare
from reports.html import render_report
from tests.reports.compare_builders import result, run_of, store_run
from tests.reports.dom import parse


def _scored(case_id: str, score: float | None, answer: str = "", outcome: str = "miss") -> Result:
    return Result(
        case_id=case_id, suite="vt", variant="v", outcome=outcome, target_tokens=4096, depth_percent=50.0,
        started_at=0.0, finished_at=1.0, expected=("XQJ", "PLM"), answer=answer,
        completion=Completion(text=answer) if outcome != "oom" else None, score=score,
        error="oom: from the test" if outcome == "oom" else None,
        params={"task": "vt", "metric": "string_match_all"},
    )  # fmt: skip


def _mixed_results(label: str = "v") -> list[Result]:
    results = [
        result("n-pass", "pass", 4096, suite="needle", answer="ZEBRA-4492-OMEGA"),
        result("n-miss", "miss", 4096, suite="needle", answer="no idea"),
        result("h-pass", "pass", 4096, suite="haystack", answer="ZEBRA-4492-OMEGA"),
        _scored("vt-half", 0.5, answer="XQJ only"),
        _scored("vt-low", 0.25, answer="nothing useful"),
        _scored("vt-full", 1.0, answer="XQJ PLM", outcome="pass"),
        _scored("vt-oom", None, outcome="oom"),
    ]
    return [r.model_copy(update={"variant": label}) for r in results]


def _report(tmp_path, results: list[Result]):
    run = run_of("v", (4096,), (50.0,))
    suites = tuple(dict.fromkeys(r.suite for r in results))
    run = run.model_copy(update={"spec": run.spec.model_copy(update={"suites": suites})})
    return parse(render_report(store_run(tmp_path, run, results)).read_text(encoding="utf-8"))


def test_scored_suites_heatmap_says_mean_score_and_pass_miss_ones_recall(tmp_path):
    doc = _report(tmp_path, _mixed_results())
    assert doc.by_id("heatmaps-title").text == "Recall and mean score by depth and length"
    vt, needle = doc.by_id("suite-vt"), doc.by_id("suite-needle")
    assert vt.attrs["data-figure"] == "mean score" and needle.attrs["data-figure"] == "recall"
    assert "mean score" in vt.find_all("h3")[0].text and "recall" in needle.find_all("h3")[0].text
    assert vt.find_all(cls="scale-label")[0].text.startswith("mean score")
    assert needle.find_all(cls="scale-label")[0].text.startswith("recall")
    assert "mean score" in doc.by_id("heatmap-vt").attrs["alt"]


def test_a_run_of_scored_suites_only_is_headed_mean_score(tmp_path):
    doc = _report(tmp_path, [r for r in _mixed_results() if r.suite == "vt"])
    assert doc.by_id("heatmaps-title").text == "Mean score by depth and length"


def test_scored_cases_below_one_are_lowest_scores_not_failures(tmp_path):
    doc = _report(tmp_path, _mixed_results())
    failed = [row.attrs["data-case-id"] for row in doc.by_id("failures").find_all("tr", cls="failure")]
    # the pass/miss miss stays a failure, and so does a scored case the server never answered
    assert failed == ["n-miss", "vt-oom"]
    rows = doc.by_id("lowest-scores").find_all("tr", cls="low-score")
    assert [(r.attrs["data-case-id"], r.attrs["data-score"]) for r in rows] == [
        ("vt-low", "0.25"),
        ("vt-half", "0.5"),
    ]
    assert (
        "XQJ, PLM" in rows[1].find_all(cls="expected")[0].text
        and "XQJ only" in rows[1].find_all(cls="answer")[0].text
    )
    assert "Lowest scores" in doc.by_id("lowest-scores-title").text


def test_pooled_recall_beside_scored_suites_says_pass_miss_suites_pooled(tmp_path):
    doc = _report(tmp_path, _mixed_results())
    assert doc.by_id("summary-pooled").text == "(pass/miss suites pooled)"
    assert doc.by_id("summary-pooled-length").text == "pass/miss suites pooled"
    # without a scored suite, the pooled figure is every suite's
    plain = _report(tmp_path / "plain", [r for r in _mixed_results() if r.suite != "vt"])
    assert plain.by_id("summary-pooled").text == "(all suites pooled)"
    assert plain.by_id("heatmaps-title").text == "Recall by depth and length"
    assert plain.find_all(id="lowest-scores") == []


def test_compare_effective_length_beside_scored_suites_says_pass_miss_suites_pooled(tmp_path):
    compare_dir = tmp_path / "compare-mixed"
    variants = []
    for label in ("fp8", "bf16"):
        run = run_of(label, (4096,), (50.0,), run_id=f"run-{label}")
        # every needle and haystack case passes, so the pooled recall has an effective length to quote
        results = [r for r in _mixed_results(label) if r.outcome == "pass" or r.suite == "vt"]
        run_dir = store_run(tmp_path, run, results)
        variants.append(CompareVariant(label=label, run_dir=relative_run_dir(compare_dir, run_dir)))
    manifest = CompareManifest(
        compare_id="mixed", created_at=0.0, command="recall-eval compare fp8 bf16", variants=tuple(variants)
    )
    html = write_compare(compare_dir, manifest).read_text(encoding="utf-8")
    assert "all suites pooled" not in html
    doc = parse(html)
    labels = {el.text for el in doc.find_all(cls="pooled-label")}
    assert labels == {"(pass/miss suites pooled)"}
    # the side-by-side heatmaps hold needle (recall) and vt (mean score): the heading names both
    assert doc.by_id("heatmaps-title").text == "Recall and mean score by depth and length"
