"""The compare report: the numbers stored in compare.json (beside the manifest, whose format is
recall_eval.compare_store's) and compare.html (self-contained: images inline), from run directories only.

    runs/compare-<id>/compare.json          manifest + numbers (machine-readable)
    runs/compare-<id>/compare.html          the report
    runs/compare-<id>/diff-<suite>-<n>.png  each difference heatmap, for pasting into chats
"""

from __future__ import annotations

import base64
import re
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from recall_eval.compare_store import (
    COMPARE_HTML,
    CompareManifest,
    read_manifest,
    run_dir_of,
    write_compare_file,
)
from recall_eval.formatting import format_p, score_points, signed_percent
from recall_eval.stats import PairedTest, ScoredPairedTest
from recall_eval.store import load_run, write_atomically
from reports import aggregates
from reports.compare_charts import diff_heatmap_png, length_recall_png
from reports.compare_conclusion import conclusion, reused_age
from reports.compare_frames import METRICS, CompareFrames, VariantRun, compare_frames
from reports.coverage_charts import CoverageView, coverage_numbers, coverage_view
from reports.heatmap import heatmap_png
from reports.html import environment
from reports.task_scores import TaskTable, task_table


def _png_uri(png: bytes) -> str:
    return "data:image/png;base64," + base64.b64encode(png).decode("ascii")


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", text).strip("_") or "x"


@dataclass(frozen=True)
class DiffImage:
    b_label: str
    a_label: str
    file_name: str  # written next to compare.html
    png: bytes
    scored: bool = False  # differences of mean scores (a scored suite), not of recall

    @property
    def data_uri(self) -> str:
        return _png_uri(self.png)


@dataclass(frozen=True)
class SuitePanel:
    """One suite: each variant's recall heatmap, and each variant's difference heatmap against the first."""

    suite: str
    heatmaps: list[tuple[str, str]]  # (variant label, data URI)
    diffs: list[DiffImage]


def suite_panels(data: CompareFrames) -> list[SuitePanel]:
    panels = []
    for suite in data.suites:
        heatmaps = [
            (v.label, _png_uri(heatmap_png(v.grids[suite], f"{v.label} · {suite}: recall")))
            for v in data.variants
        ]
        diffs = []
        for index, pair in enumerate(data.pairs, start=1):
            what = "mean score" if pair.diff_grids[suite].scored else "recall"
            title = f"{suite}: {what} {pair.b.label} − {pair.a.label}"
            png = diff_heatmap_png(pair.diff_grids[suite], pair.a.grids[suite], pair.b.grids[suite], title)
            name = f"diff-{_slug(suite)}-{index}.png"
            diffs.append(DiffImage(pair.b.label, pair.a.label, name, png, pair.diff_grids[suite].scored))
        panels.append(SuitePanel(suite=suite, heatmaps=heatmaps, diffs=diffs))
    return panels


def _test_dict(test: PairedTest, p_holm: float | None = None) -> dict[str, Any]:
    """A pass/miss paired test as compare.json stores it; p_holm: Holm over its family (the pair's
    suites, or its lengths), absent for the overall test."""
    extra = {} if p_holm is None else {"p_holm": p_holm}
    return {
        "paired": test.paired,
        "both_pass": test.both_pass,
        "both_fail": test.both_fail,
        "miss_to_pass": test.gained,
        "pass_to_miss": test.lost,
        "excluded_infra": test.excluded_infra,
        "unpaired": test.unpaired,
        "p_value": test.p_value,
    } | extra


def scored_test_dict(test: ScoredPairedTest) -> dict[str, Any]:
    """A scored suite's paired comparison as compare.json stores it."""
    return {
        "paired": test.paired,
        "mean_score_a": test.mean_a,
        "mean_score_b": test.mean_b,
        "mean_diff": test.mean_diff,
        "mean_diff_ci95": _interval(test.ci_low, test.ci_high),
        "higher": test.higher,
        "lower": test.lower,
        "wilcoxon_n": test.changed,
        "excluded_infra": test.excluded_infra,
        "unpaired": test.unpaired,
        "p_value": test.p_value,
    }


def numbers(data: CompareFrames) -> dict[str, Any]:
    """The report's numbers as plain JSON (what compare.json stores next to the manifest)."""
    variants = []
    for v in data.variants:
        variants.append(
            {
                "label": v.label,
                "run_id": v.run_id,
                "status": v.status,
                "server": v.profile_summary,
                "cases": v.summary.cases,
                # recall and its effective length: pass/miss suites only (pooled when several)
                "passes": v.recall_summary.passes,
                "answered": v.recall_summary.answered,
                "recall": v.recall_summary.recall,
                "recall_ci95": _interval(v.recall_summary.ci_low, v.recall_summary.ci_high),
                "effective_length": v.recall_summary.effective_length,
                "effective_length_pooled": v.recall_summary.pooled,
                "effective_length_by_suite": v.recall_summary.suite_effective_lengths,
                # scored suites: mean score, per length RULER's task average, effective length at 85.6
                "score": None
                if v.scores is None
                else {
                    "mean": v.scores.score,
                    "answered": v.scores.answered,
                    "by_length": {str(n): value for n, value in v.scores.by_length.items()},
                    "ruler_effective_length": v.scores.ruler_effective_length,
                },
                "outcomes": v.summary.outcomes,
                "per_length": [
                    {
                        "length": n,
                        "passes": f.passes,
                        "answered": f.answered,
                        "recall": f.recall,
                        "recall_ci95": _interval(f.ci_low, f.ci_high),
                        "ttft_p50_s": f.ttft_p50_s,
                        "prefill_tps_p50": f.prefill_tps_p50,
                        "decode_tps_p50": f.decode_tps_p50,
                    }
                    for n, f in v.lengths.items()
                ],
                "throughput": {name: getattr(v.throughput, name) for name, _, _ in METRICS},
                "time_to_ready_s": v.memory.time_to_ready_s,
                "max_total_num_tokens": v.memory.max_total_num_tokens,
                "kv_bytes_per_token": v.memory.kv_bytes_per_token,
            }
        )
    pairs = [
        {
            "a": pair.a.label,
            "b": pair.b.label,
            "overall": _test_dict(pair.overall),
            "by_suite": {
                suite: _test_dict(test, pair.p_holm.get(f"suite:{suite}"))
                for suite, test in pair.by_suite.items()
            },
            "by_length": {
                str(n): _test_dict(test, pair.p_holm.get(f"length:{n}")) for n, test in pair.by_length.items()
            },
            # scored suites: mean score difference with its t interval, Wilcoxon signed-rank
            "scored": None
            if pair.scored_overall is None
            else {
                "overall": scored_test_dict(pair.scored_overall),
                "by_suite": {suite: scored_test_dict(t) for suite, t in pair.scored_by_suite.items()},
                "by_length": {str(n): scored_test_dict(t) for n, t in pair.scored_by_length.items()},
            },
            "throughput_change_pct": pair.throughput_change,
            "interleaved": pair.interleaved,
            "minutes_apart": pair.minutes_apart,
            "placement": pair.placement,  # on a cluster: "shared node", "same time", or None
            "speed_changes": {name: asdict(change) for name, change in pair.speed_changes.items()},
        }
        for pair in data.pairs
    ]
    return {"variants": variants, "pairs": pairs}


def _interval(low: float | None, high: float | None) -> list[float] | None:
    return None if low is None or high is None else [low, high]


def _pct_change(base: float | int | None, new: float | int | None) -> str:
    if base is None or new is None or base == 0:
        return "–"
    return signed_percent((new - base) / base * 100)


def render_html(
    manifest: CompareManifest,
    data: CompareFrames,
    panels: list[SuitePanel],
    text: str,
    coverage: list[tuple[str, CoverageView | None]] | None = None,
    tasks: list[tuple[str, TaskTable]] | None = None,
) -> str:
    env = environment()
    env.filters.update(p_value=format_p, pct=signed_percent, points=score_points)
    env.globals.update(pct_change=_pct_change, METRICS=METRICS, reused_age=reused_age)
    template = env.get_template("compare.html.j2")
    score_lengths = sorted({n for v in data.variants if v.scores for n in v.scores.by_length})
    run_links = {
        v.label: (Path(v.run_dir) / "report.html").as_posix()
        for v in manifest.variants
        if not Path(v.run_dir).is_absolute()
    }
    return template.render(
        manifest=manifest,
        data=data,
        panels=panels,
        verdict=text,
        run_links=run_links,
        reused={v.label: v.reused for v in manifest.variants},
        # pass/miss suites' recall only; none to draw when every suite is scored
        length_chart=_png_uri(length_recall_png(data.variants, data.lengths))
        if any(f.recall is not None for v in data.variants for f in v.lengths.values())
        else None,
        score_lengths=score_lengths,
        # lengths where only scored suites ran have no recall row
        recall_lengths=[
            n for n in data.lengths if n not in score_lengths or any(n in p.by_length for p in data.pairs)
        ],
        coverage=coverage or [],
        tasks=tasks or [],
    )


def coverage_panels(runs: list[VariantRun]) -> list[tuple[str, CoverageView | None]]:
    """Each variant's indexer coverage, side by side; empty when no variant captured selections."""
    views = [(run.label, coverage_view(run.results, f"{run.label}: indexer coverage")) for run in runs]
    return views if any(view is not None for _, view in views) else []


def write_compare(compare_dir: Path, manifest: CompareManifest) -> Path:
    """Load the manifest's runs, compute the numbers, write compare.json and compare.html; returns the html."""
    compare_dir = Path(compare_dir)
    compare_dir.mkdir(parents=True, exist_ok=True)
    runs = []
    for item in manifest.variants:
        run, stored = load_run(run_dir_of(compare_dir, item))
        runs.append(
            VariantRun(
                label=item.label,
                run_dir=run_dir_of(compare_dir, item),
                run=run,
                results=aggregates.latest_per_case(stored),
                reused=item.reused,
                age_s=item.reused_age_s,
                scoring=manifest.scoring,
            )
        )
    data = compare_frames(runs, manifest.interleaved)
    text = conclusion(data)
    panels = suite_panels(data)
    for panel in panels:
        for image in panel.diffs:
            write_atomically(compare_dir / image.file_name, image.png)
    computed = numbers(data)
    for entry, run in zip(computed["variants"], runs, strict=True):
        entry["indexer_coverage"] = coverage_numbers(run.results)  # None for runs without --capture-indexer
    write_compare_file(
        compare_dir,
        manifest,
        {
            "rendered_at": time.time(),
            "verdict": text,
            # seconds from each reused run's end to this compare's start (not a number of the runs)
            "reused_age_s": {v.label: v.reused_age_s for v in data.variants if v.reused},
            "numbers": computed,
        },
    )
    html = compare_dir / COMPARE_HTML
    tasks = [(run.label, table) for run in runs if (table := task_table(run.frame, run.run.spec.suites))]
    page = render_html(manifest, data, panels, text, coverage_panels(runs), tasks)
    write_atomically(html, page.encode("utf-8"))
    return html


def render_compare(compare_dir: Path, scoring: str | None = None) -> Path:
    """Re-render an existing compare directory from its compare.json and the runs it names; `scoring`
    (when given) is the headline verdict from now on."""
    manifest = read_manifest(compare_dir)
    if scoring is not None:
        manifest = manifest.model_copy(update={"scoring": scoring})
    return write_compare(Path(compare_dir), manifest)
