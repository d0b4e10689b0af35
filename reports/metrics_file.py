"""metrics.json of a gated run: the figures a CI system or a dashboard reads, with their provenance.

format_version     1; readers ignore fields they do not know
tool               name and version of recall-eval
commit             the git commit of the tested code (--commit), else null
run                run id, directory, status, variant, scoring
verdict            exit code, passed, the verdict's lines
suites             per suite: cases, answered, recall with its 95% Wilson interval (scored: mean score)
cells              per suite x length: the same, the baseline's figure, failure
baseline           name, source run, tolerance, and per scope the paired test (with --baseline)
provenance         server version, model, profile and engine, index_k_dtype / index_topk (launched,
                   learned or unknown), the run's settings (its spec), hardware seen (this machine;
                   what the server said about its own in server_info)
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from recall_eval.baseline_gate import ScopeTest
from recall_eval.stats import recall_table, score_table
from recall_eval.store import write_atomically
from recall_eval.target_facts import target_facts
from recall_eval.types import Run
from reports.gate_cells import Cell

METRICS_FORMAT = 1


def _number(value: Any) -> Any:
    return None if value is None or (isinstance(value, float) and pd.isna(value)) else value


def _suites(frame: pd.DataFrame) -> dict[str, dict[str, Any]]:
    found = {}
    for suite in dict.fromkeys(frame["suite"]):
        part = frame[frame["suite"] == suite]
        if part["metric"].notna().any():
            row = score_table(part).iloc[0]
            found[str(suite)] = {
                "cases": len(part),
                "answered": int(row["answered"]),
                "score": _number(row["score"]),
            }
            continue
        row = recall_table(part).iloc[0]
        found[str(suite)] = {
            "cases": int(row["cases"]),
            "answered": int(row["answered"]),
            "passes": int(row["passes"]),
            "recall": _number(float(row["recall"])),
            "ci_low": _number(float(row["ci_low"])),
            "ci_high": _number(float(row["ci_high"])),
            "infra": int(row["infra"]),
        }
    return found


def metrics_document(
    run: Run,
    run_dir: Path,
    frame: pd.DataFrame,
    cells: Sequence[Cell],
    tests: Sequence[ScopeTest],
    exit_code: int,
    lines: Sequence[str],
    tool_version: str,
    hardware: dict[str, Any],
    commit: str | None = None,
    baseline: dict[str, Any] | None = None,
) -> dict[str, Any]:
    facts = target_facts(run)
    profile = run.profile
    return {
        "format_version": METRICS_FORMAT,
        "tool": {"name": "recall-eval", "version": tool_version},
        "commit": commit,
        "run": {
            "run_id": run.run_id,
            "run_dir": str(run_dir),
            "status": run.status,
            "variant": run.spec.variant,
            "scoring": run.scoring,
            "cases_planned": run.cases_planned,
            "cases_stored": len(frame),
        },
        "verdict": {"exit_code": exit_code, "passed": exit_code == 0, "lines": list(lines)},
        "suites": _suites(frame),
        "cells": [
            {key: _number(value) for key, value in dataclasses.asdict(cell).items() if key != "worst"}
            for cell in cells
        ],
        "baseline": None
        if baseline is None
        else {**baseline, "tests": [{**dataclasses.asdict(test), "worse": test.worse} for test in tests]},
        "provenance": {
            "server_version": run.versions.get("server"),
            "model": run.server_info.get("model") or (profile.served_model_name if profile else None),
            "profile": profile.name if profile else None,
            "engine": profile.engine if profile else None,
            "index_k_dtype": facts.index_k_dtype,
            "index_k_dtype_source": facts.index_k_dtype_source,
            "index_topk": facts.index_topk,
            "index_topk_source": facts.index_topk_source,
            "settings": run.spec.model_dump(mode="json"),
            "versions": dict(run.versions),
            "server_info": run.server_info,
            "hardware": hardware,
        },
    }


def write_metrics(path: Path, document: dict[str, Any]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomically(path, (json.dumps(document, indent=2) + "\n").encode("utf-8"))
    return path
