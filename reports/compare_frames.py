"""The numbers of a compare report, computed from stored runs only (no server, no rendering).

One VariantFrame per variant (recall per suite/length/cell with Wilson intervals, effective length,
throughput medians, time to ready, memory plan), and one PairFrame per variant against the first
(exact McNemar on identical cases, overall, per suite and per length; recall differences per cell).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from recall_eval.stats import mcnemar_exact, percentile, wilson_interval
from recall_eval.types import NOT_APPLICABLE_OUTCOMES, RECALL_OUTCOMES, Result, Run
from reports import frames


@dataclass(frozen=True)
class VariantRun:
    """One variant's stored run, as the compare report reads it."""

    label: str
    run_dir: Path
    run: Run
    results: list[Result]  # one per case id (frames.latest_per_case)


@dataclass(frozen=True)
class Throughput:
    """Medians over live completions (None where nothing was measured)."""

    ttft_s: float | None
    prefill_tps: float | None
    decode_tps: float | None
    samples: int


METRICS: tuple[tuple[str, str, bool], ...] = (
    # (Throughput attribute, label, higher is better)
    ("ttft_s", "TTFT p50", False),
    ("prefill_tps", "prefill tok/s p50", True),
    ("decode_tps", "decode tok/s p50", True),
)


def _prompt_tokens(result: Result) -> int | None:
    """Server usage where it reported one, else the calibrated length (as reports.frames counts it)."""
    if result.completion is not None and result.completion.prompt_tokens:
        return result.completion.prompt_tokens
    return result.prompt_tokens


def request_metrics(result: Result) -> dict[str, float]:
    """One request's TTFT, prefill and decode speed (those measured); empty unless a live model answered."""
    completion = result.completion
    if result.outcome not in RECALL_OUTCOMES or completion is None:
        return {}
    values: dict[str, float] = {}
    if completion.ttft_s:
        values["ttft_s"] = completion.ttft_s
        if tokens := _prompt_tokens(result):
            values["prefill_tps"] = tokens / completion.ttft_s
    if (speed := completion.decode_tokens_per_s) is not None:
        values["decode_tps"] = speed
    return values


def throughput_of(results: Iterable[Result]) -> Throughput:
    measured = [
        request_metrics(r) for r in results if r.outcome in RECALL_OUTCOMES and r.completion is not None
    ]

    def median(name: str) -> float | None:
        return percentile([m[name] for m in measured if name in m], 50)

    return Throughput(
        ttft_s=median("ttft_s"),
        prefill_tps=median("prefill_tps"),
        decode_tps=median("decode_tps"),
        samples=len(measured),
    )


@dataclass(frozen=True)
class SignTest:
    """Per-request speed on identical cases: in how many pairs B was better or worse (exact sign test)."""

    better: int  # B faster (for TTFT: lower)
    worse: int
    p_value: float  # two-sided; ties are left out


def speed_sign_tests(a_results: Iterable[Result], b_results: Iterable[Result]) -> dict[str, SignTest]:
    """For each metric, a sign test over the cases measured under both variants."""
    a_by_id = {r.case_id: request_metrics(r) for r in a_results}
    b_by_id = {r.case_id: request_metrics(r) for r in b_results}
    tests = {}
    for name, _, higher_is_better in METRICS:
        better = worse = 0
        for case_id in a_by_id.keys() & b_by_id.keys():
            a_value, b_value = a_by_id[case_id].get(name), b_by_id[case_id].get(name)
            if a_value is None or b_value is None or a_value == b_value:
                continue
            if (b_value > a_value) == higher_is_better:
                better += 1
            else:
                worse += 1
        # The sign test is the exact McNemar computation on the two discordant counts.
        tests[name] = SignTest(better=better, worse=worse, p_value=mcnemar_exact(better, worse))
    return tests


def _find_key(tree: Any, keys: tuple[str, ...]) -> Any:
    """First value under any of keys, searching nested dicts (server_info nests /server_info's answer)."""
    if isinstance(tree, Mapping):
        for key in keys:
            if tree.get(key) is not None:
                return tree[key]
        for value in tree.values():
            found = _find_key(value, keys)
            if found is not None:
                return found
    return None


@dataclass(frozen=True)
class MemoryPlan:
    """Server start and memory plan as the server reported them (None where it did not)."""

    max_total_num_tokens: int | None
    kv_bytes_per_token: int | None
    time_to_ready_s: float | None
    index_k_dtype: str | None = None
    index_topk: int | None = None


def memory_plan_of(run: Run) -> MemoryPlan:
    tokens = _find_key(run.server_info, ("max_total_num_tokens", "max_total_tokens"))
    per_token = _find_key(run.server_info, ("kv_bytes_per_token", "kv_cache_bytes_per_token"))
    return MemoryPlan(
        max_total_num_tokens=int(tokens) if isinstance(tokens, int | float) else None,
        kv_bytes_per_token=int(per_token) if isinstance(per_token, int | float) else None,
        time_to_ready_s=run.time_to_ready_s,
        index_k_dtype=str(dtype) if (dtype := _find_key(run.server_info, ("index_k_dtype",))) else None,
        index_topk=int(topk)
        if isinstance(topk := _find_key(run.server_info, ("index_topk",)), int)
        else None,
    )


def _group(results: Iterable[Result], key: Callable[[Result], Any]) -> dict[Any, list[Result]]:
    groups: dict[Any, list[Result]] = {}
    for result in results:
        groups.setdefault(key(result), []).append(result)
    return groups


@dataclass(frozen=True)
class VariantFrame:
    label: str
    run_id: str
    run_dir: Path
    status: str
    profile_summary: str
    summary: frames.Summary  # overall recall with Wilson interval, effective length, outcome counts
    suite_summaries: dict[str, frames.Summary]
    grids: dict[str, frames.SuiteGrid]  # per suite, over the compare's common lengths and depths
    lengths: dict[int, frames.LengthFrame]  # per length: recall and throughput (all suites together)
    length_ci: dict[int, tuple[float, float]]  # per length: 95% Wilson interval of recall
    throughput: Throughput  # medians over every live completion
    memory: MemoryPlan

    @property
    def effective_length(self) -> int | None:
        return self.summary.effective_length


def _profile_summary(run: Run) -> str:
    profile = run.profile
    if profile is None:
        return "unknown server"
    if profile.engine == "external" or profile.base_url:
        return f"running server at {profile.base_url}"
    parts = [f"{profile.name} ({profile.engine})", f"index keys {profile.index_k_dtype}"]
    if profile.index_topk is not None:
        parts.append(f"index_topk {profile.index_topk}")
    if profile.mem_fraction_static is not None:
        parts.append(f"mem {profile.mem_fraction_static:g}")
    if profile.context_length is not None:
        parts.append(f"ctx {profile.context_length:,}")
    return ", ".join(parts)


def variant_frame(
    variant: VariantRun, suites: list[str], lengths: list[int], depths: list[float]
) -> VariantFrame:
    results = variant.results
    length_frames = {frame.target_tokens: frame for frame in frames.length_frames(results)}
    return VariantFrame(
        label=variant.label,
        run_id=variant.run.run_id,
        run_dir=variant.run_dir,
        status=variant.run.status,
        profile_summary=_profile_summary(variant.run),
        summary=frames.summarize(results),
        suite_summaries={
            suite: frames.summarize([r for r in results if r.suite == suite]) for suite in suites
        },
        grids={suite: frames.suite_grid(results, suite, lengths, depths) for suite in suites},
        lengths=length_frames,
        length_ci={n: wilson_interval(f.passes, f.answered) for n, f in length_frames.items()},
        throughput=throughput_of(results),
        memory=memory_plan_of(variant.run),
    )


@dataclass(frozen=True)
class PairedTest:
    """Exact McNemar on identical cases (same case id) of a baseline A and a variant B."""

    both_pass: int
    both_fail: int
    lost: int  # pass under A, not under B (pass -> miss)
    gained: int  # not under A, pass under B (miss -> pass)
    # pairs where either side is an infrastructure outcome (or only one side not applicable): not in the test
    excluded_infra: int
    unpaired: int  # cases stored under only one of the two runs
    p_value: float

    @property
    def paired(self) -> int:
        return self.both_pass + self.both_fail + self.lost + self.gained


def paired_test(a_results: Iterable[Result], b_results: Iterable[Result]) -> PairedTest:
    a_by_id = {r.case_id: r for r in a_results}
    b_by_id = {r.case_id: r for r in b_results}
    counts = {"both_pass": 0, "both_fail": 0, "lost": 0, "gained": 0, "excluded_infra": 0}
    for case_id in a_by_id.keys() & b_by_id.keys():
        a, b = a_by_id[case_id], b_by_id[case_id]
        if a.outcome in NOT_APPLICABLE_OUTCOMES and b.outcome in NOT_APPLICABLE_OUTCOMES:
            continue  # a cell neither side could build: nothing to compare, nothing to flag
        if not (a.outcome in RECALL_OUTCOMES and b.outcome in RECALL_OUTCOMES):
            counts["excluded_infra"] += 1
            continue
        a_pass, b_pass = a.outcome == "pass", b.outcome == "pass"
        key = {(True, True): "both_pass", (False, False): "both_fail", (True, False): "lost"}.get(
            (a_pass, b_pass), "gained"
        )
        counts[key] += 1
    unpaired = len(a_by_id.keys() ^ b_by_id.keys())
    return PairedTest(**counts, unpaired=unpaired, p_value=mcnemar_exact(counts["lost"], counts["gained"]))


def _pct_change(base: float | None, new: float | None) -> float | None:
    if base is None or new is None or base == 0:
        return None
    return (new - base) / base * 100.0


@dataclass(frozen=True)
class DiffGrid:
    """Recall B - A per cell of one suite; None where either side has no answered case there."""

    suite: str
    lengths: tuple[int, ...]
    depths: tuple[float, ...]
    values: tuple[tuple[float | None, ...], ...]  # values[depth index][length index]


def diff_grid(a: frames.SuiteGrid, b: frames.SuiteGrid) -> DiffGrid:
    if (a.lengths, a.depths) != (b.lengths, b.depths):
        raise ValueError(f"suite {a.suite}: the two grids differ in lengths or depths")
    rows = []
    for row_a, row_b in zip(a.cells, b.cells, strict=True):
        row = []
        for cell_a, cell_b in zip(row_a, row_b, strict=True):
            rate_a = cell_a.recall if cell_a is not None else None
            rate_b = cell_b.recall if cell_b is not None else None
            row.append(None if rate_a is None or rate_b is None else rate_b - rate_a)
        rows.append(tuple(row))
    return DiffGrid(suite=a.suite, lengths=a.lengths, depths=a.depths, values=tuple(rows))


@dataclass(frozen=True)
class PairFrame:
    """Variant B against the baseline A (the first variant)."""

    a: VariantFrame
    b: VariantFrame
    overall: PairedTest
    by_suite: dict[str, PairedTest]
    by_length: dict[int, PairedTest]
    diff_grids: dict[str, DiffGrid]  # per suite: recall B - A per cell
    throughput_change: dict[str, float | None] = field(default_factory=dict)  # metric -> % change B vs A
    speed_tests: dict[str, SignTest] = field(default_factory=dict)  # metric -> per-request sign test


def pair_frame(a_run: VariantRun, b_run: VariantRun, a: VariantFrame, b: VariantFrame) -> PairFrame:
    a_suite, b_suite = _group(a_run.results, lambda r: r.suite), _group(b_run.results, lambda r: r.suite)
    a_len = _group(a_run.results, lambda r: r.target_tokens)
    b_len = _group(b_run.results, lambda r: r.target_tokens)
    return PairFrame(
        a=a,
        b=b,
        overall=paired_test(a_run.results, b_run.results),
        by_suite={
            s: paired_test(a_suite.get(s, []), b_suite.get(s, []))
            for s in sorted(a_suite.keys() | b_suite.keys())
        },
        by_length={
            n: paired_test(a_len.get(n, []), b_len.get(n, [])) for n in sorted(a_len.keys() | b_len.keys())
        },
        diff_grids={suite: diff_grid(a.grids[suite], b.grids[suite]) for suite in a.grids},
        throughput_change={
            name: _pct_change(getattr(a.throughput, name), getattr(b.throughput, name))
            for name, _, _ in METRICS
        },
        speed_tests=speed_sign_tests(a_run.results, b_run.results),
    )


@dataclass(frozen=True)
class CompareFrames:
    variants: list[VariantFrame]
    pairs: list[PairFrame]  # each variant against the first
    suites: list[str]
    lengths: list[int]
    depths: list[float]


def compare_frames(runs: list[VariantRun]) -> CompareFrames:
    """Frames for every variant and for each variant against the first."""
    if len(runs) < 2:
        raise ValueError("a compare needs at least two runs")
    every = [r for run in runs for r in run.results]
    suites = list(frames.suites_in(every, runs[0].run.spec.suites))
    lengths = sorted(set(runs[0].run.spec.lengths) | {r.target_tokens for r in every})
    depths = sorted(set(runs[0].run.spec.depths) | {r.depth_percent for r in every})
    variants = [variant_frame(run, suites, lengths, depths) for run in runs]
    pairs = [
        pair_frame(runs[0], run, variants[0], frame)
        for run, frame in zip(runs[1:], variants[1:], strict=True)
    ]
    return CompareFrames(variants=variants, pairs=pairs, suites=suites, lengths=lengths, depths=depths)
