"""Every number a rendered report shows, recomputed independently from results_frame with pandas and scipy.

Two runs (two suites, every outcome kind, random timings) are written with the real store; report.html and
compare.html are rendered from their directories, parsed, and each table cell and headline is compared with
the value computed here from the results frame alone (pandas group-bys, scipy.stats.binomtest and bootstrap,
numpy medians), formatted the way the page writes it. Any difference fails.
"""

from __future__ import annotations

import json
import random
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy.stats import binomtest, bootstrap

from recall_eval.compare_store import CompareManifest, CompareVariant, relative_run_dir
from recall_eval.frame import results_frame
from recall_eval.store import RunStore
from recall_eval.types import Completion, Outcome, Profile, Result, Run, RunSpec
from reports.compare_report import write_compare
from reports.html import render_report
from tests.reports.dom import Element, parse

LENGTHS = (1000, 2000, 4000, 8000)
DEPTHS = (0.0, 50.0, 100.0)
SUITES = ("needle", "config")
TRIALS = 3
LIVE: tuple[Outcome, ...] = ("pass", "miss", "empty", "truncated")


def _outcome(rng: random.Random, variant: str, suite: str, length: int) -> Outcome:
    pass_rate = {
        "A": {1000: 1.0, 2000: 0.95, 4000: 0.6, 8000: 0.3},
        "B": {1000: 1.0, 2000: 1.0, 4000: 0.9, 8000: 0.7},
    }
    rate = pass_rate[variant][length] - (0.1 if suite == "config" and length > 1000 else 0.0)
    roll = rng.random()
    if suite == "config" and length == 1000 and roll < 0.3:
        return "not_applicable"  # the suite's smallest prompt is longer: never sent
    if length == 8000 and roll < 0.15:
        return rng.choice(["oom", "too_long", "timeout"])
    return "pass" if rng.random() < rate else rng.choice(["miss", "miss", "empty", "truncated"])


def _store(root: Path, variant: str, seed: int) -> Path:
    rng = random.Random(seed)
    run = Run(
        run_id=f"run-{variant}",
        spec=RunSpec(suites=SUITES, lengths=LENGTHS, depths=DEPTHS, trials=TRIALS, variant=variant),
        profile=Profile(name="reference", engine="reference", index_topk=512 if variant == "A" else 1024),
        status="finished",
        created_at=1_700_000_000.0,
        finished_at=1_700_000_500.0,
    )
    store = RunStore.create(run, root)
    for suite in SUITES:
        for length in LENGTHS:
            for depth in DEPTHS:
                for trial in range(TRIALS):
                    outcome = _outcome(rng, variant, suite, length)
                    completion = None
                    if outcome in LIVE:
                        tokens = rng.randrange(3, 14)
                        gaps = tuple(rng.uniform(0.01, 0.05) for _ in range(tokens - 2))
                        ttft = length / rng.uniform(2000, 6000)
                        completion = Completion(text="x", finish_reason="stop", prompt_tokens=length + rng.randrange(-5, 6),
                                                completion_tokens=tokens, ttft_s=ttft, itl_s=gaps,
                                                latency_s=ttft + sum(gaps))  # fmt: skip
                    store.append_result(
                        Result(case_id=f"{suite}-{length}-{depth:g}-{trial}",
                               suite=suite, variant=variant,
                               outcome=outcome, answer="x", expected=("KEY-1",), target_tokens=length,
                               depth_percent=depth, trial=trial, prompt_tokens=length, completion=completion,
                               error=None if outcome in LIVE else "infra", started_at=0.0, finished_at=1.0)
                    )  # fmt: skip
    return store.path


# --- the page's number formats, written again here ---------------------------------------------------
def pct(value: float | None, digits: int = 1) -> str:
    return "–" if value is None else f"{100 * value:.{digits}f}%"


def tokens(value: float | None) -> str:
    return "–" if value is None else f"{round(value):,}"


def seconds(value: float | None) -> str:
    if value is None:
        return "–"
    return f"{value * 1000:.0f} ms" if value < 1 else f"{value:.2f} s"


def rate(value: float | None) -> str:
    return "–" if value is None else f"{value:,.1f}"


def p_text(p: float) -> str:
    return "p < 0.001" if p < 0.001 else f"p = {p:.2g}"


def signed(value: float) -> str:
    return f"{value:+.1f}%"


def text_of(el: Element) -> str:
    return re.sub(r"\s+", " ", el.text).strip()


def num(value: float | None) -> str:
    return "" if value is None else repr(float(value))


# --- the recomputation ----------------------------------------------------------------------------------
def wilson(k: int, n: int) -> tuple[float, float] | None:
    if n == 0:
        return None
    ci = binomtest(k, n).proportion_ci(confidence_level=0.95, method="wilson")
    return ci.low, ci.high


def recall_of(df: pd.DataFrame) -> dict:
    answered = int(df["outcome"].isin(LIVE).sum())
    passes = int((df["outcome"] == "pass").sum())
    return {
        "cases": len(df),
        "answered": answered,
        "passes": passes,
        "infra": int(df["outcome"].isin(["too_long", "oom", "crash", "timeout", "error"]).sum()),
        "recall": passes / answered if answered else None,
        "ci": wilson(passes, answered),
    }


def effective(df: pd.DataFrame) -> int | None:
    best = None
    measured = df[
        df["outcome"] != "not_applicable"
    ]  # a length with nothing measured neither holds nor breaks
    for length, part in measured.groupby("target_tokens"):
        value = recall_of(part)["recall"]
        if value is None or value < 0.9:
            break
        best = int(length)
    return best


def median(series: pd.Series) -> float | None:
    values = series.dropna().to_numpy(dtype=float)
    return float(np.median(values)) if values.size else None


def live_timings(df: pd.DataFrame) -> pd.DataFrame:
    """Timings recomputed from the frame's raw columns: decode = gaps / their sum, prefill = tokens / TTFT."""
    live = df[df["outcome"].isin(LIVE)]
    return pd.DataFrame(
        {
            "ttft": live["ttft_s"],
            "prefill": live["prompt_tokens"].astype(float) / live["ttft_s"],
            "decode": live["decode_gaps"].astype(float) / live["decode_time_s"],
        }
    )


@pytest.fixture(scope="module")
def compared(tmp_path_factory: pytest.TempPathFactory) -> dict:
    root = tmp_path_factory.mktemp("runs")
    run_a, run_b = _store(root, "A", 1), _store(root, "B", 2)
    compare_dir = root / "compare-x"
    manifest = CompareManifest(compare_id="x", created_at=1_700_000_000.0, variants=(
        CompareVariant(label="A", run_dir=relative_run_dir(compare_dir, run_a)),
        CompareVariant(label="B", run_dir=relative_run_dir(compare_dir, run_b)),
    ))  # fmt: skip
    html = write_compare(compare_dir, manifest)
    report = render_report(run_a)
    frame = results_frame(compare_dir)
    return {
        "frame": frame,
        "a": frame[frame["run_id"] == "run-A"],
        "b": frame[frame["run_id"] == "run-B"],
        "report": parse(report.read_text(encoding="utf-8")),
        "compare": parse(html.read_text(encoding="utf-8")),
        "compare_json": json.loads((compare_dir / "compare.json").read_text(encoding="utf-8")),
    }


def test_the_frame_has_every_case_once(compared: dict) -> None:
    assert len(compared["frame"]) == 2 * len(SUITES) * len(LENGTHS) * len(DEPTHS) * TRIALS
    assert set(compared["frame"]["outcome"]) >= {
        "pass",
        "miss",
        "empty",
        "truncated",
        "oom",
        "not_applicable",
    }


def test_run_report_headline_and_suites(compared: dict) -> None:
    a, dom = compared["a"], compared["report"]
    want = recall_of(a)
    card = dom.by_id("summary-recall")
    assert (int(card.attrs["data-passes"]), int(card.attrs["data-answered"])) == (
        want["passes"],
        want["answered"],
    )
    assert card.attrs["data-ci-low"] == num(want["ci"][0]) and card.attrs["data-ci-high"] == num(
        want["ci"][1]
    )
    low, high = want["ci"]
    assert (
        f"{want['passes']} passed of {want['answered']} answered; 95% Wilson interval {pct(low)}–{pct(high)}"
        in text_of(card)
    )
    assert pct(want["recall"]) in text_of(card)
    cases = dom.by_id("summary-cases")
    assert (
        text_of(cases)
        == f"cases {want['cases']} {want['answered']} answered by the model, {want['infra']} infrastructure"
    )
    # effective length: per suite, and the pooled figure labelled as pooled
    per_suite = {row.attrs["data-suite"]: row for row in dom.find_all("tr", cls="suite-effective-length")}
    assert list(per_suite) == list(SUITES)
    for suite, row in per_suite.items():
        value = effective(a[a["suite"] == suite])
        assert row.attrs["data-value"] == ("" if value is None else str(value))
        cells = [text_of(cell) for cell in row.children if isinstance(cell, Element)]
        assert cells == [suite, "none" if value is None else f"{tokens(value)} tokens"]
    pooled = dom.find_all("tr", cls="pooled-effective-length")[0]
    assert pooled.attrs["data-value"] == str(effective(a) or "")
    assert "pooled" in text_of(pooled)
    counts = a["outcome"].value_counts()
    for row in dom.find_all("tr", cls="outcome-count"):
        assert row.attrs["data-count"] == str(int(counts.get(row.attrs["data-outcome"], 0)))
    for section in dom.find_all("section", cls="suite"):
        suite = section.attrs["data-suite"]
        part = a[a["suite"] == suite]
        want = recall_of(part)
        line = section.find_all("p", cls="suite-line")[0]
        eff = effective(part)
        expected = (
            f"recall {pct(want['recall'])} ({want['passes']}/{want['answered']}; 95% Wilson interval "
            f"{pct(want['ci'][0])}–{pct(want['ci'][1])}), effective length "
            + (f"{tokens(eff)} tokens" if eff is not None else "none: below 90% at the shortest length")
        )
        assert text_of(line).startswith(expected)


def test_run_report_heatmap_cells(compared: dict) -> None:
    a, dom = compared["a"], compared["report"]
    checked = 0
    for table in dom.find_all("table", cls="heatmap-table"):
        part = a[a["suite"] == table.attrs["data-suite"]]
        for td in table.find_all("td", cls="cell"):
            cell = part[(part["target_tokens"] == int(td.attrs["data-length"]))
                        & (part["depth_percent"] == float(td.attrs["data-depth"]))]  # fmt: skip
            want = recall_of(cell)
            got = (int(td.attrs["data-passes"]), int(td.attrs["data-answered"]), int(td.attrs["data-infra"]))
            assert got == (want["passes"], want["answered"], want["infra"])
            if want["answered"]:
                assert text_of(td).startswith(f"{want['passes']}/{want['answered']}")
            checked += 1
    assert checked == len(SUITES) * len(LENGTHS) * len(DEPTHS)


def test_run_report_throughput_table(compared: dict) -> None:
    a, dom = compared["a"], compared["report"]
    rows = dom.by_id("throughput").find_all("tr", cls="throughput-row")
    assert [int(r.attrs["data-length"]) for r in rows] == list(LENGTHS)
    for row in rows:
        part = a[a["target_tokens"] == int(row.attrs["data-length"])]
        timing = live_timings(part)
        want = recall_of(part)
        ttft50, ttft95 = median(timing["ttft"]), float(np.percentile(timing["ttft"].dropna(), 95))
        prefill, decode = median(timing["prefill"]), median(timing["decode"])
        assert row.attrs["data-ttft-p50"] == num(ttft50) and row.attrs["data-ttft-p95"] == num(ttft95)
        assert float(row.attrs["data-prefill-tps"]) == pytest.approx(prefill, rel=1e-12)
        assert float(row.attrs["data-decode-tps"]) == pytest.approx(decode, rel=1e-12)
        cells = [text_of(td) for td in row.find_all("td")]
        assert cells == [
            tokens(int(row.attrs["data-length"])),
            tokens(median(part["prompt_tokens"].astype(float))),
            str(want["cases"]),
            f"{pct(want['recall'], 0)} {want['passes']}/{want['answered']}",
            str(len(timing)),
            seconds(ttft50),
            seconds(ttft95),
            rate(prefill),
            rate(decode),
        ]
    failures = dom.find_all("tr", cls="failure")
    assert len(failures) == int((~a["outcome"].isin(["pass", "not_applicable"])).sum())


def _mcnemar(a: pd.DataFrame, b: pd.DataFrame) -> dict:
    both = a.merge(b, on="case_id", suffixes=("_a", "_b"))
    both = both[(both["outcome_a"] != "not_applicable") | (both["outcome_b"] != "not_applicable")]
    live = both[both["outcome_a"].isin(LIVE) & both["outcome_b"].isin(LIVE)]
    pa, pb = live["outcome_a"] == "pass", live["outcome_b"] == "pass"
    gained, lost = int((~pa & pb).sum()), int((pa & ~pb).sum())
    p = binomtest(gained, gained + lost, 0.5).pvalue if gained + lost else 1.0
    return {"paired": len(live), "both_pass": int((pa & pb).sum()), "both_fail": int((~pa & ~pb).sum()),
            "gained": gained, "lost": lost, "p": p, "excluded": len(both) - len(live)}  # fmt: skip


def _holm(p_values: dict[str, float]) -> dict[str, float]:
    """Holm's step-down adjustment written out from its definition (Holm 1979), apart from the tool's:
    the k-th smallest of m p-values times (m - k + 1), made non-decreasing in that order, capped at 1."""
    ranked = sorted(p_values, key=p_values.get)
    adjusted, running = {}, 0.0
    for k, scope in enumerate(ranked):
        running = max(running, min(1.0, (len(ranked) - k) * p_values[scope]))
        adjusted[scope] = running
    return adjusted


def test_compare_variants_and_suites(compared: dict) -> None:
    dom = compared["compare"]
    for row in dom.find_all("tr", cls="variant-row"):
        part = compared[row.attrs["data-label"].lower()]
        want = recall_of(part)
        cells = [text_of(td) for td in row.find_all("td")]
        assert cells[3] == str(want["cases"])
        assert cells[4] == f"{pct(want['recall'])} {want['passes']}/{want['answered']}"
        assert cells[5] == f"{pct(want['ci'][0])}–{pct(want['ci'][1])}"
        eff = effective(part)
        assert cells[6] == (
            f"{tokens(eff)} tokens (all suites pooled)" if eff else "none: below 90% at the shortest length"
        )
        assert cells[7].split()[0] == str(want["infra"])
    for table in dom.find_all("table", cls="suite-summary"):
        suite = table.attrs["data-suite"]
        for row in table.find_all("tr", cls="suite-variant"):
            label = row.attrs["data-variant"]
            part = compared[label.lower()]
            part = part[part["suite"] == suite]
            want, eff = recall_of(part), effective(part)
            cells = [text_of(td) for td in row.find_all("td")]
            assert cells[1] == f"{pct(want['recall'])} {want['passes']}/{want['answered']}"
            assert cells[2] == f"{pct(want['ci'][0])}–{pct(want['ci'][1])}"
            assert cells[3] == (f"{tokens(eff)} tokens" if eff else "none: below 90% at the shortest length")
            if label == "B":
                a = compared["a"]
                test = _mcnemar(a[a["suite"] == suite], part)
                assert cells[4:6] == [f"{test['gained']} / {test['lost']}", p_text(test["p"])]


def test_compare_recall_by_length_and_paired_tests(compared: dict) -> None:
    dom, a, b = compared["compare"], compared["a"], compared["b"]
    for row in dom.by_id("length-recall").find_all("tr", cls="length-row"):
        length = int(row.attrs["data-length"])
        cells = [text_of(td) for td in row.find_all("td")]
        expected = [tokens(length)]
        for part in (a, b):
            want = recall_of(part[part["target_tokens"] == length])
            expected.append(f"{pct(want['recall'], 0)} {want['passes']}/{want['answered']} "
                            f"[{pct(want['ci'][0], 0)}–{pct(want['ci'][1], 0)}]")  # fmt: skip
        test = _mcnemar(a[a["target_tokens"] == length], b[b["target_tokens"] == length])
        flips = f"{test['gained']} / {test['lost']}" + (
            f" (+{test['excluded']} infra)" if test["excluded"] else ""
        )
        expected += [flips, p_text(test["p"])]
        assert cells == expected
    scopes = {"all": (a, b)}
    scopes |= {f"suite:{s}": (a[a["suite"] == s], b[b["suite"] == s]) for s in SUITES}
    scopes |= {f"length:{n}": (a[a["target_tokens"] == n], b[b["target_tokens"] == n]) for n in LENGTHS}
    rows = dom.by_id("paired-tests").find_all("tr", cls="paired-row")
    assert [r.attrs["data-scope"] for r in rows] == list(scopes)
    holm = _holm({s: _mcnemar(*scopes[s])["p"] for s in scopes if s.startswith("suite:")})
    holm |= _holm({s: _mcnemar(*scopes[s])["p"] for s in scopes if s.startswith("length:")})
    for row in rows:
        scope = row.attrs["data-scope"]
        test = _mcnemar(*scopes[scope])
        cells = [text_of(td) for td in row.find_all("td")][2:]
        adjusted = p_text(holm[scope]) if scope in holm else "–"
        assert cells == [str(test[k]) for k in ("paired", "both_pass", "both_fail", "gained", "lost")] + [
            p_text(test["p"]), adjusted, str(test["excluded"]), "0"]  # fmt: skip
        assert float(row.attrs["data-p"]) == pytest.approx(test["p"], rel=1e-12)
    by_length = compared["compare_json"]["numbers"]["pairs"][0]["by_length"]
    assert {f"length:{n}": t["p_holm"] for n, t in by_length.items()} == pytest.approx(
        {s: p for s, p in holm.items() if s.startswith("length:")}
    )
    overall = compared["compare_json"]["numbers"]["pairs"][0]["overall"]
    test = _mcnemar(a, b)
    assert (overall["miss_to_pass"], overall["pass_to_miss"], overall["p_value"]) == (
        test["gained"],
        test["lost"],
        pytest.approx(test["p"]),
    )


def test_compare_throughput(compared: dict) -> None:
    dom, a, b = compared["compare"], compared["a"], compared["b"]
    assert dom.by_id("throughput-order").attrs["data-interleaved"] == "false"
    ta, tb = live_timings(a), live_timings(b)
    names = {"ttft_s": "ttft", "prefill_tps": "prefill", "decode_tps": "decode"}
    both = pd.concat([ta.add_suffix("_a"), a["case_id"]], axis=1).merge(
        pd.concat([tb.add_suffix("_b"), b["case_id"]], axis=1), on="case_id"
    )
    for row in dom.by_id("throughput-compare").find_all("tr", cls="throughput-metric"):
        metric = names[row.attrs["data-metric"]]
        med_a, med_b = median(ta[metric]), median(tb[metric])
        fmt = seconds if metric == "ttft" else rate
        cells = [text_of(td) for td in row.find_all("td")]
        pair = both[[f"{metric}_a", f"{metric}_b"]].dropna()
        changes = ((pair[f"{metric}_b"] - pair[f"{metric}_a"]) / pair[f"{metric}_a"] * 100).to_numpy()
        ci = bootstrap((changes,), np.median, n_resamples=2000, method="percentile",
                       rng=np.random.default_rng(0)).confidence_interval  # fmt: skip
        per_case = (
            f"{signed(float(np.median(changes)))} [{signed(ci.low)} to {signed(ci.high)}] {len(changes)}"
        )
        assert cells == [fmt(med_a), fmt(med_b), signed((med_b - med_a) / med_a * 100), per_case]
        assert not row.find_all("td", cls="sign-test")  # sequential runs: no p-value
    timed = dom.by_id("throughput-compare").find_all("tr")[-1]
    assert [text_of(td) for td in timed.find_all("td") if text_of(td)] == [str(len(ta)), str(len(tb))]
    assert "p =" not in text_of(dom.by_id("throughput-section")).split("by length")[0]
