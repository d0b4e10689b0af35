"""Stored baselines in the library: `baseline save` (a finished run -> a baseline file), and a sweep
gated on one (`--baseline`): the options a baseline fills in, the check that its cases are this run's,
and the verdict with its paired tests (recall_eval.baseline_gate). The file format is the core's
(recall_eval.baseline_store)."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

from recall_eval.api.options import SweepOptions
from recall_eval.api.records import RunRecord
from recall_eval.baseline_gate import ScopeTest, baseline_tests, mismatch
from recall_eval.baseline_store import Baseline, baseline_of, baseline_path, write_baseline
from recall_eval.errors import BadInput
from recall_eval.exit_codes import EXIT_BELOW_GATE, EXIT_OK, Verdict
from recall_eval.stats import SIGNIFICANCE
from recall_eval.types import RunSpec


def parse_tolerance(text: str | float | None) -> float | None:
    """--tolerance: '2pp' or '2%' (percentage points) or '0.02' (a recall difference); None when not
    given. BadInput outside [0, 1)."""
    if text is None or isinstance(text, float | int):
        value = None if text is None else float(text)
    else:
        found = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*(pp|%)?\s*", text)
        if found is None:
            raise BadInput(f"--tolerance {text!r}: write a drop in recall like 2pp or 0.02")
        value = float(found.group(1)) / (100 if found.group(2) else 1)
    if value is not None and not 0 <= value < 1:
        raise BadInput(f"--tolerance {text}: must be a drop in recall from 0 up to (not including) 1")
    return value


def save_baseline(
    run: str | Path, name: str | Path, tolerance: str | float | None = None, at: float | None = None
) -> Path:
    """`recall-eval baseline save RUN NAME`: the baseline file of a finished run, written to NAME
    (NAME.json when it has no suffix); returns its path. BadInput for a run that did not finish."""
    import time

    from recall_eval.api.reading import load_run
    from recall_eval.target_facts import target_facts

    record = load_run(run)
    if record.status != "finished":
        raise BadInput(
            f"{record.path}: the run is {record.status}; a baseline is saved from a finished run (resume it first)"
        )
    if not record.results:
        raise BadInput(f"{record.path}: the run has no results to make a baseline of")
    path = baseline_path(name)
    facts = target_facts(record.run)
    profile = record.run.profile
    target = {
        "profile": profile.name if profile else None,
        "engine": profile.engine if profile else None,
        "model": record.run.server_info.get("model") or record.run.server_info.get("served_model_name"),
        "index_k_dtype": facts.index_k_dtype,
        "index_topk": facts.index_topk,
    }
    baseline = baseline_of(
        record.run,
        list(record.results),
        path.stem,
        target,
        parse_tolerance(tolerance) or 0.0,
        time.time() if at is None else at,
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    return write_baseline(path, baseline)


def with_baseline_defaults(options: SweepOptions, baseline: Baseline) -> SweepOptions:
    """The sweep's options with what was not given taken from the baseline's run: its grid, answer
    budget, request knobs and scoring; what was given stays (and is checked against the baseline)."""
    spec = baseline.run_spec
    grid = {
        "suites": spec.suites,
        "lengths": spec.lengths,
        "depths": spec.depths,
        "trials": spec.trials,
        "seed": spec.seed,
        "max_tokens": spec.max_tokens if spec.max_tokens_given else None,
    }
    knobs = spec.settings(verdicts=True)  # the request settings that change verdicts (RequestSettings)
    return dataclasses.replace(
        options,
        grid=dataclasses.replace(
            options.grid, **{k: v for k, v in grid.items() if getattr(options.grid, k) is None}
        ),
        request=dataclasses.replace(
            options.request, **{k: v for k, v in knobs.items() if getattr(options.request, k) is None}
        ),
        scoring=options.scoring if options.scoring is not None else baseline.scoring,
    )


def check_baseline(path: Path | str, baseline: Baseline, spec: RunSpec, scoring: str) -> None:
    """BadInput naming what differs when the baseline's cases or scoring are not this run's."""
    from recall_eval.api.versions import reuse_key_of

    differs = mismatch(baseline, spec, scoring, reuse_key_of(spec))
    if differs:
        raise BadInput(
            f"--baseline {path}: its cases differ from this run's ({'; '.join(differs)}); leave those options "
            "out to take the baseline's, or save a new baseline"
        )


def baseline_verdict(
    baseline: Baseline, record: RunRecord, tolerance: float | None, alpha: float = SIGNIFICANCE
) -> tuple[Verdict, tuple[ScopeTest, ...]]:
    """The run's verdict with the baseline test added: exit 4 and a line per scope significantly worse
    (recall_eval.baseline_gate); a run that measured nothing (3) or learned nothing (5) keeps its verdict."""
    tests = tuple(
        baseline_tests(
            baseline.frame(),
            record.frame,
            record.run.spec.suites,
            baseline.tolerance if tolerance is None else tolerance,
            alpha,
        )
    )
    ending = record.verdict or Verdict(EXIT_OK, ())
    if ending.exit_code not in (EXIT_OK, EXIT_BELOW_GATE):
        return ending, tests
    worse = [test.line(baseline.name) for test in tests if test.worse]
    if not worse:
        return ending, tests
    return Verdict(EXIT_BELOW_GATE, (*ending.lines, *worse)), tests
