"""Lenient is the headline unless the user picks strict: the frame, the console line, the report and the
--fail-under gate all follow the choice, and each shows the other verdict beside it."""

from __future__ import annotations

import pytest

from recall_eval.errors import BadInput
from recall_eval.exit_codes import EXIT_BELOW_GATE, EXIT_OK, RecallGate, verdict
from recall_eval.frame import frame_of, headline_frame
from recall_eval.summary import summary_line
from tests.reports.compare_builders import result, run_of, store_run
from tests.reports.dom import parse


def results():
    """4 needle cases: 4 lenient passes, 2 of them strict misses; 2 config cases, 1 pass."""
    made = []
    for i in range(4):
        r = result(f"n{i}", "pass", 1000, suite="needle")
        why = "the answer also names 'ZEBRA-1111-OMEGA'" if i < 2 else None
        made.append(r.model_copy(update={"strict_outcome": "miss" if i < 2 else "pass", "strict_why": why}))
    made.append(result("c0", "pass", 1000, suite="config").model_copy(update={"strict_outcome": "pass"}))
    made.append(result("c1", "miss", 1000, suite="config").model_copy(update={"strict_outcome": "miss"}))
    return made


def test_headline_frame_swaps_the_verdict_and_keeps_the_other():
    frame = frame_of([(None, results())])
    assert frame["passed"].sum() == 5 and frame["strict_passed"].sum() == 3
    strict = headline_frame(frame, "strict")
    assert strict["passed"].sum() == 3 and strict["lenient_passed"].sum() == 5
    assert list(strict["outcome"]).count("miss") == 3
    with pytest.raises(BadInput, match="--scoring 'exact'"):
        headline_frame(frame, "exact")


def test_old_results_without_a_strict_verdict_keep_their_lenient_one():
    frame = frame_of([(None, [result("n0", "pass", 1000)])])  # stored before strict scoring existed
    assert frame["strict_passed"].isna().all()
    assert headline_frame(frame, "strict")["passed"].tolist() == [True]
    assert "strict" not in summary_line(headline_frame(frame))  # no strict figure to state


def test_console_line_labels_pooled_and_states_both_verdicts():
    line = summary_line(headline_frame(frame_of([(None, results())])))
    assert line.startswith("recall pooled 83.3% (Wilson ")
    assert "5 passed of 6 answered, strict 50.0% · config 50.0%, needle 100.0%" in line
    strict = summary_line(headline_frame(frame_of([(None, results())]), "strict"))
    assert "3 passed of 6 answered, lenient 83.3% · config 50.0%, needle 50.0%" in strict


def test_gate_follows_the_headline():
    gate = RecallGate(0.8, {})
    assert verdict(results(), gate).exit_code == EXIT_OK
    strict = verdict(results(), gate, scoring="strict")
    assert strict.exit_code == EXIT_BELOW_GATE and "recall 0.500 (3/6)" in strict.lines[0]


def test_report_headline_and_the_other_verdict(tmp_path):
    import reports

    run = run_of("fp8", [1000]).model_copy(update={"spec": run_of("fp8", [1000]).spec.model_copy(
        update={"suites": ("needle", "config")})})  # fmt: skip
    run_dir = store_run(tmp_path, run, results())
    dom = parse(reports.render_report(run_dir).read_text(encoding="utf-8"))
    card = dom.by_id("summary-recall")
    assert card.attrs["data-passes"] == "5" and "(all suites pooled)" in card.text
    assert "lenient scoring" in card.text and "5 passed of 6 answered" in card.text
    other = dom.by_id("summary-other-scoring")
    assert other.attrs["data-scoring"] == "strict" and other.attrs["data-passes"] == "3"
    suites = {
        row.attrs["data-suite"]: float(row.attrs["data-recall"]) for row in card.find_all(cls="suite-recall")
    }
    assert suites == {"needle": 1.0, "config": 0.5}

    dom = parse(reports.render_report(run_dir, "strict").read_text(encoding="utf-8"))
    card = dom.by_id("summary-recall")
    assert card.attrs["data-passes"] == "3" and "strict scoring" in card.text
    assert dom.by_id("summary-other-scoring").attrs["data-scoring"] == "lenient"


def test_compare_report_follows_the_compare_headline(tmp_path):
    from recall_eval.compare_store import CompareManifest, CompareVariant, relative_run_dir
    from reports.compare_report import write_compare

    run_a = store_run(tmp_path, run_of("fp8", [1000], run_id="run-a"), results())
    run_b = store_run(tmp_path, run_of("bf16", [1000], dtype="bf16", run_id="run-b"), results())
    compare_dir = tmp_path / "compare-x"
    variants = tuple(
        CompareVariant(label=label, run_dir=relative_run_dir(compare_dir, run))
        for label, run in (("fp8", run_a), ("bf16", run_b))
    )
    for scoring, passes, other in (("lenient", "5", "strict recall"), ("strict", "3", "lenient recall")):
        manifest = CompareManifest(compare_id="x", created_at=0.0, variants=variants, scoring=scoring)
        dom = parse(write_compare(compare_dir, manifest).read_text(encoding="utf-8"))
        rows = dom.by_id("variants-table").find_all("tr", cls="variant-row")
        assert [row.attrs["data-passes"] for row in rows] == [passes, passes]
        assert (
            other in dom.by_id("variants-table").text and f", {scoring}" in dom.by_id("variants-table").text
        )
