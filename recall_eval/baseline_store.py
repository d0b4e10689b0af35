"""A stored baseline's format: a small, portable file meant to be committed beside the code it gates.

    recall-eval baseline save RUN NAME       -> NAME.json (or the path given)
    recall-eval sweep --baseline NAME.json   runs only the candidate, paired on the same case ids

It holds what a gate needs and nothing a repository should not carry: the run's spec (the grid, seed,
answer budget and request knobs: no key, header names only, as run.json), its versions with the reuse
key (recall_eval.reuse: a candidate whose prompts differ is refused), the headline scoring, a few facts
about the target it was measured on (an allow-list: profile, engine, model, precision, index_topk), an
optional tolerance, and one row per case: id, suite, length, depth, trial, both verdicts, a scored
suite's grade. No prompt, no answer, no secret. Versioned by `format_version`; readers keep fields
they do not know, so a newer writer's additions do not break an older reader.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd
from pydantic import BaseModel, ConfigDict, Field

from recall_eval.errors import BadInput
from recall_eval.frame import check_scoring, headline_frame
from recall_eval.store import read_versioned, write_atomically
from recall_eval.types import RECALL_OUTCOMES, Result, Run, RunSpec

BASELINE_FORMAT = 1
BASELINE_SUFFIX = ".json"


class BaselineCase(BaseModel):
    """One case of the baseline run, as the gate pairs it (by case_id)."""

    model_config = ConfigDict(frozen=True, extra="allow")  # fields it does not know are kept

    case_id: str
    suite: str
    target_tokens: int
    depth_percent: float
    trial: int = 0
    outcome: str  # the lenient verdict, or an infrastructure outcome (recall_eval.types.Outcome)
    strict_outcome: str | None = None  # the strict verdict (None: stored before strict scoring)
    metric: str | None = None  # scored suites: the metric that graded it
    score: float | None = None  # scored suites: the grade in [0, 1]


class Baseline(BaseModel):
    """The content of a baseline file."""

    model_config = ConfigDict(frozen=True, extra="allow")  # fields it does not know are kept

    format_version: int = BASELINE_FORMAT
    name: str
    created_at: float  # unix time the file was written
    source_run: str  # run id of the run it was saved from
    spec: dict[str, Any]  # the run's RunSpec (as run.json holds it; no secrets there either)
    versions: dict[str, str] = Field(default_factory=dict)  # run.json's versions: the reuse key with them
    scoring: str = "lenient"  # the headline verdict its recall uses
    target: dict[str, Any] = Field(default_factory=dict)  # what it ran on: an allow-list of facts
    # a drop in recall up to this much (0.02 = 2 percentage points) is accepted: the gate fails only
    # when the drop's interval lies wholly above it
    tolerance: float = 0.0
    cases: tuple[BaselineCase, ...]

    @property
    def run_spec(self) -> RunSpec:
        """The spec as this version knows it (fields a newer writer added are left out)."""
        known = {name: value for name, value in self.spec.items() if name in RunSpec.model_fields}
        return RunSpec.model_validate(known)

    def frame(self) -> pd.DataFrame:
        """The baseline's cases as a results frame (the columns the statistics read), with its headline
        verdict in `outcome` / `passed` (recall_eval.frame.headline_frame)."""
        rows = [
            {
                **case.model_dump(),
                "score": case.score if case.outcome in RECALL_OUTCOMES else None,  # as recall_eval.frame
                "counted": case.outcome in RECALL_OUTCOMES,
                "passed": case.outcome == "pass",
                "strict_passed": None if case.strict_outcome is None else case.strict_outcome == "pass",
                "strict_why": None,
                "error": None,
            }
            for case in self.cases
        ]
        columns = [*BaselineCase.model_fields, "counted", "passed", "strict_passed", "strict_why", "error"]
        frame = pd.DataFrame(rows, columns=columns)
        return headline_frame(frame, check_scoring(self.scoring))


TARGET_FACTS = ("profile", "engine", "model", "index_k_dtype", "index_topk")


def baseline_of(
    run: Run,
    results: list[Result],
    name: str,
    target: dict[str, Any],
    tolerance: float = 0.0,
    at: float = 0.0,
) -> Baseline:
    """The baseline of a finished run: its spec, versions and one row per case (the last result of each
    case counts, as in every figure). `target`: facts about the server, kept only for TARGET_FACTS."""
    latest = {result.case_id: result for result in results}
    cases = tuple(
        BaselineCase(
            case_id=result.case_id,
            suite=result.suite,
            target_tokens=result.target_tokens,
            depth_percent=result.depth_percent,
            trial=result.trial,
            outcome=result.outcome,
            strict_outcome=result.strict_outcome,
            metric=result.params.get("metric"),
            score=result.score,
        )
        for result in latest.values()
    )
    return Baseline(
        name=name,
        created_at=at,
        source_run=run.run_id,
        spec=run.spec.model_dump(mode="json"),
        versions=dict(run.versions),
        scoring=run.scoring,
        target={key: value for key, value in target.items() if key in TARGET_FACTS and value is not None},
        tolerance=tolerance,
        cases=tuple(
            sorted(cases, key=lambda c: (c.suite, c.target_tokens, c.depth_percent, c.trial, c.case_id))
        ),
    )


def baseline_path(name: str | Path) -> Path:
    """NAME -> NAME.json; a path with a suffix stays as it is."""
    path = Path(name)
    return path if path.suffix else path.with_suffix(BASELINE_SUFFIX)


def write_baseline(path: Path, baseline: Baseline) -> Path:
    """The file, atomically: one case per line, so a change of verdicts reads as a short diff."""
    document = baseline.model_dump(mode="json", exclude={"cases"})
    head = json.dumps(document, indent=1)[:-2]  # without the closing "\n}"
    rows = ",\n  ".join(
        json.dumps(case.model_dump(mode="json", exclude_none=True)) for case in baseline.cases
    )
    text = f'{head},\n "cases": [\n  {rows}\n ]\n}}\n' if baseline.cases else f'{head},\n "cases": []\n}}\n'
    write_atomically(path, text.encode("utf-8"))
    return path


def read_baseline(path: str | Path) -> Baseline:
    """A baseline file; BadInput naming what is wrong (missing, not JSON, not a baseline, too new)."""
    path = Path(path)
    if not path.is_file():
        raise BadInput(
            f"--baseline {path}: no such file; write one with `recall-eval baseline save RUN NAME`"
        )
    return read_versioned(path, Baseline, BASELINE_FORMAT, "baseline file", f"--baseline {path}", BadInput)
