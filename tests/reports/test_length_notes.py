"""The report says when lengths are estimates, and lists cases the server counted off target."""

from __future__ import annotations

from recall_eval.store import RunStore
from reports import render_report
from tests.reports.sample_run import build_sample_run


def test_estimates_and_off_target_cases_are_flagged(tmp_path):
    run_dir = build_sample_run(tmp_path)
    store = RunStore.open(run_dir)
    results = store.results()
    store.write_run(
        store.run.model_copy(
            update={"estimated_length_suites": ("needle",), "length_measure": "tiktoken:cl100k_base"}
        )
    )
    off = results[0].model_copy(
        update={
            "server_prompt_tokens": results[0].target_tokens + 500,
            "length_error_tokens": 500,
            "length_off_target": True,
        }
    )
    store.results_path.write_text("".join(r.model_dump_json() + "\n" for r in [off, *results[1:]]))
    html = render_report(run_dir).read_text()
    assert 'id="length-estimates"' in html and "<b>estimates</b>" in html and "needle" in html
    assert 'id="off-target-table"' in html and f"server counted {off.server_prompt_tokens} (+500)" in html
    # each off-target case names its suite and depth, not only its id
    assert f"{off.suite} · depth {off.depth_percent:g}% · {off.case_id}" in html


def test_exact_runs_carry_no_length_warnings(tmp_path):
    html = render_report(build_sample_run(tmp_path)).read_text()
    assert 'id="length-estimates"' not in html and 'id="off-target-table"' not in html
