"""The single-run HTML report: run dir -> report.html (self-contained) and heatmap-<suite>.png files."""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
from jinja2 import Environment, FileSystemLoader, StrictUndefined
from matplotlib.colors import to_hex

from recall_eval.engines import launched
from recall_eval.formatting import percent, rate, seconds, tokens, utc
from recall_eval.frame import frame_of, headline_frame
from recall_eval.scoring import budget_eaten_by_reasoning
from recall_eval.stats import score_table
from recall_eval.store import RunStore, write_atomically
from recall_eval.target_facts import target_facts
from recall_eval.types import (
    INFRA_OUTCOMES,
    NOT_APPLICABLE_OUTCOMES,
    RECALL_OUTCOMES,
    Result,
    Run,
    request_knobs,
)
from reports import aggregates
from reports.coverage_charts import coverage_view
from reports.heatmap import RECALL_CMAP, RECALL_NORM, cell_text, heatmap_png, infra_label
from reports.labels import OUTCOME_LABELS, OUTCOME_MEANINGS
from reports.task_scores import task_table

REPORT_FILE = "report.html"
# more suites than this (RULER's 11 tasks): small heatmaps side by side under one caption
GROUPED_HEATMAPS_FROM = 3
TEMPLATES = Path(__file__).parent / "templates"
_SECRET_KEY = re.compile(r"token|secret|password|passwd|api[_-]?key|credential", re.IGNORECASE)


@dataclass(frozen=True)
class SuiteView:
    """One suite's section: its grid, headline numbers and heatmap image."""

    name: str
    grid: aggregates.SuiteGrid
    summary: aggregates.Summary
    png_name: str
    png: bytes
    score: float | None = None  # scored suites: mean score of the answered cases (stats.score_table)
    metric: str | None = None  # scored suites: the metric's name

    @property
    def png_data_uri(self) -> str:
        return "data:image/png;base64," + base64.b64encode(self.png).decode("ascii")


def environment() -> Environment:
    """A fresh jinja2 environment: autoescape everywhere, since model outputs are untrusted text."""
    env = Environment(
        loader=FileSystemLoader(TEMPLATES),
        autoescape=True,
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    env.filters.update(
        tokens=tokens,
        percent=percent,
        seconds=seconds,
        rate=rate,
        outcome_label=OUTCOME_LABELS.__getitem__,
        recall_colour=recall_colour,
        utc=utc,
        number=_number,
    )
    env.globals.update(
        cell_text=cell_text,
        infra_label=infra_label,
        RECALL_OUTCOMES=RECALL_OUTCOMES,
        INFRA_OUTCOMES=INFRA_OUTCOMES,
        NOT_APPLICABLE_OUTCOMES=NOT_APPLICABLE_OUTCOMES,
        OUTCOME_MEANINGS=OUTCOME_MEANINGS,
        GROUPED_HEATMAPS_FROM=GROUPED_HEATMAPS_FROM,
    )
    return env


def recall_colour(value: float | None) -> str:
    """The heatmap colour of a recall value, for table cells; grey when there is no recall."""
    return "#C9CDD2" if value is None else to_hex(RECALL_CMAP(RECALL_NORM(value)))


def _number(value: float | None) -> str:
    """A float for data-* attributes: full precision, '' when absent."""
    return "" if value is None else repr(float(value))


def _png_name(suite: str) -> str:
    return "heatmap-" + (re.sub(r"[^A-Za-z0-9_.-]+", "_", suite) or "suite") + ".png"


def _display(value: Any) -> str:
    """A metadata value as one readable string (tuples as comma lists, nested things as JSON)."""
    if value is None or value == () or value == {} or value == "":
        return "–"
    if isinstance(value, bool):  # not Python's True/False in a report
        return "yes" if value else "no"
    if isinstance(value, tuple | list) and all(isinstance(v, str | int | float) for v in value):
        return ", ".join(f"{v:g}" if isinstance(v, float) else str(v) for v in value)
    if isinstance(value, dict | tuple | list):
        return json.dumps(value, sort_keys=True, default=str)
    return str(value)


def _masked_env(env: dict[str, str]) -> dict[str, str]:
    """Environment variables with secret-looking values hidden: reports get shared."""
    return {k: ("(hidden)" if _SECRET_KEY.search(k) else v) for k, v in sorted(env.items())}


_EXTERNAL_FIELDS = ("name", "engine", "base_url", "replica_base_urls", "served_model_name", "index_k_dtype",
                    "index_topk", "port", "enable_return_indexer_topk")  # fmt: skip


def metadata_rows(run: Run) -> dict[str, list[tuple[str, str]]]:
    """Spec, request settings and profile as (field, value) rows for the metadata tables; a request
    setting is shown under its declared label (recall_eval.types.RequestSettings)."""
    knobs = request_knobs()
    spec = [(k, _display(v)) for k, v in run.spec.model_dump().items() if k not in knobs]
    settings = [(knob.label, _display(getattr(run.spec, name))) for name, knob in knobs.items()]
    profile: list[tuple[str, str]] = []
    if run.profile is not None:
        dumped = run.profile.model_dump()
        dumped["env"] = _masked_env(run.profile.env)
        # Unset fields (None, empty) are left out: the table shows what this run actually chose. The
        # server settings are what it launched or learned (recall_eval.target_facts), never a default.
        facts = target_facts(run)
        dumped.update(
            index_k_dtype=facts.shown("index_k_dtype"),
            index_topk=facts.shown("index_topk"),
            port=facts.shown("port"),
        )
        if not launched(run.profile):  # launch settings (tp, host, ...) a running server never had
            dumped = {k: v for k, v in dumped.items() if k in _EXTERNAL_FIELDS}
        profile = [(k, _display(v)) for k, v in dumped.items() if v not in (None, (), {}, "")]
    versions = [(k, str(v)) for k, v in sorted(run.versions.items())]
    return {"spec": spec, "settings": settings, "profile": profile, "versions": versions}


def _score_of(rows: pd.DataFrame) -> dict[str, Any]:
    """score and metric of a scored suite's rows (stats.score_table), empty for a pass/miss suite."""
    metrics = rows["metric"].dropna() if "metric" in rows else pd.Series(dtype=object)
    if metrics.empty:
        return {}
    mean = score_table(rows).iloc[0]["score"]
    return {"score": None if pd.isna(mean) else float(mean), "metric": str(metrics.iloc[0])}


def _figure_of(frame: pd.DataFrame, suite: str) -> str:
    """What a suite's heatmap shows: mean score for a scored suite, recall for a pass/miss one."""
    return "score" if frame.loc[frame["suite"] == suite, "metric"].notna().any() else "recall"


def suite_views(run: Run, frame: pd.DataFrame) -> list[SuiteView]:
    views = []
    for suite in aggregates.suites_in(frame, run.spec.suites):
        # a suite's rows may say which planned axes they follow (param_grid: "lengths" for tasks with no
        # depth, "none" for prepared files); the others draw only what they stored
        kinds = (
            set(frame.loc[frame["suite"] == suite, "param_grid"].dropna()) if "param_grid" in frame else set()
        )
        lengths = () if "none" in kinds else run.spec.lengths
        depths = () if kinds & {"none", "lengths", "baseline"} else run.spec.depths
        grid = aggregates.suite_grid(frame, suite, lengths, depths)
        views.append(
            SuiteView(
                name=suite,
                grid=grid,
                summary=aggregates.summarize(frame[frame["suite"] == suite]),
                png_name=_png_name(suite),
                png=heatmap_png(grid, f"{suite}: {_figure_of(frame, suite)} by depth and length"),
                **_score_of(frame[frame["suite"] == suite]),
            )
        )
    return views


def render_html(
    run: Run,
    results: list[Result],
    suites: list[SuiteView],
    frame: pd.DataFrame | None = None,
    unreadable: Sequence[str] = (),
) -> str:
    """The report page for a run, given its suites' views (heatmaps already drawn) and its results frame;
    `unreadable`: one line per results.jsonl line that could not be read (kept, not counted)."""
    if frame is None:
        frame = headline_frame(frame_of([(run, results)]), run.scoring)
    template = environment().get_template("report.html.j2")
    return template.render(
        run=run,
        summary=aggregates.summarize(frame, planned=run.spec.suites),
        # recall is the figure of pass/miss suites only; scored suites have theirs in the task table
        recall_summary=aggregates.summarize(aggregates.pass_miss(frame), planned=run.spec.suites),
        suites=suites,
        lengths=aggregates.length_frames(frame),
        tasks=task_table(frame, run.spec.suites),
        failures=aggregates.failures(frame),
        lowest_scores=aggregates.lowest_scores(frame),
        strict_misses=aggregates.strict_misses(frame),
        off_target=aggregates.off_target(frame),
        tokenizer_text=", ".join(
            f"{name} ({n} cases)" for name, n in aggregates.tokenizers_used(frame).items()
        )
        or "–",
        metadata=metadata_rows(run),
        budget_too_small=budget_eaten_by_reasoning(frame),
        facts=target_facts(run),
        coverage=coverage_view(results, f"{run.spec.variant}: indexer coverage by layer and length"),
        server_info=json.dumps(run.server_info, indent=2, sort_keys=True, default=str)
        if run.server_info
        else "",
        unreadable=list(unreadable),
    )


def render_report(run_dir: Path, scoring: str | None = None) -> Path:
    """Render run_dir/report.html (and one heatmap PNG per suite next to it); returns the report path.
    The headline verdict is `scoring` when given, else the run's own (Run.scoring)."""
    store = RunStore.open(Path(run_dir))
    run_dir, run, stored = store.path, store.run, store.read_results()
    results = aggregates.latest_per_case(stored.results)
    frame = headline_frame(frame_of([(run, results)]), scoring or run.scoring)
    suites = suite_views(run, frame)
    for view in suites:
        write_atomically(run_dir / view.png_name, view.png)
    report = run_dir / REPORT_FILE
    unreadable = [line.describe() for line in stored.unreadable]
    write_atomically(report, render_html(run, results, suites, frame, unreadable).encode("utf-8"))
    return report
