"""Results as data: one pandas row per case (`results_frame`), one per run (`runs_frame`), and `export_frame`.

The reports aggregate this table, `recall-eval export` writes it, notebooks load it. Every column is
listed once in RESULT_COLUMNS (the README's "Results as data" table is checked against it); nested
values are flattened (`param_<key>`) or written as JSON strings (`expected`).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit, urlunsplit

import pandas as pd

from recall_eval.compare_store import COMPARE_FILE, read_manifest, run_dir_of
from recall_eval.engines import ENGINE_NAMES
from recall_eval.errors import BadInput, UserError
from recall_eval.store import RUN_FILE, RunStore, named_dir
from recall_eval.target_facts import UNKNOWN, target_facts
from recall_eval.types import RECALL_OUTCOMES, Result, Run, is_baseline

Scoring = Literal["lenient", "strict"]
SCORINGS: tuple[Scoring, ...] = ("lenient", "strict")  # the headline verdict; lenient unless the user picks
ExportFormat = Literal["csv", "parquet", "jsonl"]
FILE_SUITE_PREFIXES = ("ruler-jsonl:", "jsonl:")  # suites.jsonl_files: a prepared file's rows, not a grid
EXPORT_FORMATS: tuple[ExportFormat, ...] = ("csv", "parquet", "jsonl")

# name -> meaning; the order is the frame's column order (params follow as param_<key>).
RESULT_COLUMNS: dict[str, str] = {
    "run_id": "run the case belongs to",
    "variant": "the run's variant label (default, fp8, bf16, topk=1024, ...)",
    "profile": "name of the server profile (external for --base-url)",
    "engine": f"the server engine: {ENGINE_NAMES}",
    "index_k_dtype": "index-key precision the run launched or learned from /server_info (fp8, bf16, fp4), else unknown",
    "index_k_dtype_source": "launched (the profile's), server (its /server_info said it) or unknown",
    "index_topk": "index_topk the run launched or learned from /server_info (empty: unknown)",
    "index_topk_source": "launched, server or unknown",
    "endpoint": "base URL the requests went to (credentials and query left out)",
    "interleaved": "the run's requests were interleaved with another variant's on live servers",
    "case_id": "stable id of the case: same id = same prompt across runs (pairs in compare)",
    "suite": "needle, config, multiturn, a RULER task (niah_single_1, vt, ...), mrcr_2/4/8, jsonl files",
    "task": "the task graded: the suite's name, or for a file suite the task it names (niah_single_1, ...)",
    "target_tokens": "requested prompt length in the server's tokens",
    "depth_percent": "requested position of the fact, 0 = start, 100 = end",
    "trial": "index of the independent case within one (length, depth) cell",
    "outcome": "pass, miss, empty, truncated, too_long, oom, crash, timeout, error, not_applicable",
    "counted": "True for answers from a live model (pass, miss, empty, truncated): counted in recall",
    "passed": "outcome == pass (the lenient verdict)",
    "strict_outcome": "the strict verdict: a lenient pass that does not commit to the value is a miss (README, Scoring)",
    "strict_passed": "strict_outcome == pass (empty for results stored before strict scoring)",
    "strict_why": "why the strict verdict misses a lenient pass (another value, a correction, a prompt echo)",
    "score": "scored suites only (RULER tasks, mrcr, jsonl): the metric's grade in [0, 1]; empty otherwise",
    "metric": "scored suites only: string_match_all, string_match_part or mrcr; empty for pass/miss suites",
    "max_tokens": "the answer budget the case was sent with (the case's own without --max-tokens: RULER's per task)",
    "answer": "the model's answer text (untrusted)",
    "expected": "accepted answers, as a JSON list",
    "prompt_tokens": "prompt length the server saw: its usage.prompt_tokens, else the calibrated length",
    "prompt_tokens_source": "usage (the server's count) or calibration (the tokenizer's)",
    "calibrated_prompt_tokens": "prompt length measured by the tokenizer during calibration",
    "server_prompt_tokens": "prompt length the server counted for this request (empty: it gave no count)",
    "server_prompt_tokens_source": "usage (its count in the answer), or the tokenizer endpoint that counted the prompt where it streams no usage",
    "length_error_tokens": "server_prompt_tokens - target_tokens",
    "length_off_target": "True when the server-counted length is more than 1% (at least 8 tokens) off target",
    "tokenizer": "what measured the calibration: server:/v1/tokenize or tiktoken:<encoding>",
    "needle_token_offset": "token offset of the fact's first token in the rendered prompt",
    "finish_reason": "stop, length, ... as the server reported it",
    "completion_tokens": "server usage.completion_tokens (else its tokenizer's count of the answer, else streamed chunks)",
    "completion_tokens_source": "usage, tokenized (the server's tokenizer on the answer: it streams no usage) or chunks",
    "ttft_s": "request sent -> first content token, seconds (answered cases only)",
    "decode_gaps": "number of measured gaps between streamed chunks (tokens after the first)",
    "decode_time_s": "sum of those gaps, seconds",
    "latency_s": "request sent -> stream closed, seconds",
    "prefill_tps": "prompt_tokens / ttft_s (answered cases only; includes queueing and network)",
    "decode_tps": "decode_gaps / decode_time_s (answered cases only)",
    "miss_cause": "selection or generation, for misses with indexer coverage",
    "error": "the reason of an infrastructure outcome",
    "attempt": "1 + relaunches the case went through",
    "started_at": "unix time the case started",
    "finished_at": "unix time the case finished",
}

RUN_COLUMNS: dict[str, str] = {
    "run_id": "run id (its directory name)",
    "run_dir": "path of the run directory",
    "variant": "variant label",
    "status": "running, interrupted, finished, failed",
    "profile": "profile name",
    "engine": f"the server engine: {ENGINE_NAMES}",
    "index_k_dtype": "index-key precision launched or learned, else unknown",
    "index_k_dtype_source": "launched, server or unknown",
    "index_topk": "index_topk launched or learned (empty: unknown)",
    "index_topk_source": "launched, server or unknown",
    "endpoint": "base URL the requests went to",
    "interleaved": "requests interleaved with another variant's on live servers",
    "suites": "suites, comma-separated",
    "lengths": "planned lengths, comma-separated",
    "depths": "planned depths, comma-separated",
    "trials": "trials per cell",
    "seed": "seed of the cases",
    "planned": "cases the spec asks for (counted from the suites' cases: a file suite's rows); empty if unknown",
    "stored": "cases with a stored result",
    "created_at": "unix time the run was created",
    "finished_at": "unix time it ended (empty while running)",
    "time_to_ready_s": "server launch to ready, seconds (empty for a running server)",
}


def _run_fields(run: Run | None) -> dict[str, Any]:
    if run is None:  # results without their run (tests, in-memory use): run columns stay empty
        return {"run_id": None, "variant": None, "profile": None, "engine": None, "index_k_dtype": UNKNOWN,
                "index_k_dtype_source": "unknown", "index_topk": None, "index_topk_source": "unknown",
                "endpoint": None, "interleaved": False}  # fmt: skip
    profile = run.profile
    facts = target_facts(run)
    return {
        "run_id": run.run_id,
        "variant": run.spec.variant,
        "profile": profile.name if profile else None,
        "engine": profile.engine if profile else None,
        "index_k_dtype": facts.shown("index_k_dtype"),
        "index_k_dtype_source": facts.index_k_dtype_source,
        "index_topk": facts.index_topk,
        "index_topk_source": facts.index_topk_source,
        "endpoint": _endpoint(run),
        "interleaved": run.interleaved,
    }


def _endpoint(run: Run) -> str | None:
    """The server's base URL: the profile's (--base-url), else the one the run recorded; no credentials."""
    url = (run.profile.base_url if run.profile else None) or run.server_info.get("base_url")
    if not isinstance(url, str) or not url:
        return None
    parts = urlsplit(url)
    host = parts.hostname or ""
    netloc = f"{host}:{parts.port}" if parts.port else host
    return urlunsplit((parts.scheme, netloc, parts.path, "", "")).rstrip("/")


def result_row(run: Run | None, result: Result) -> dict[str, Any]:
    """One case as a flat dict of RESULT_COLUMNS (then param_<key> for each of the case's params)."""
    row = _run_fields(run)
    row["variant"] = result.variant
    if result.endpoint:  # the replica that served the case, where the result records one
        row["endpoint"] = result.endpoint
    completion = result.completion
    counted = result.outcome in RECALL_OUTCOMES
    usage_prompt = completion.prompt_tokens if completion is not None else None
    prompt_tokens = usage_prompt or result.prompt_tokens
    timed = counted and completion is not None
    ttft = completion.ttft_s if timed and completion.ttft_s else None
    decode_time = sum(completion.itl_s) if timed else None
    row.update(
        case_id=result.case_id,
        suite=result.suite,
        task=result.params.get("task", result.suite),
        target_tokens=result.target_tokens,
        depth_percent=result.depth_percent,
        trial=result.trial,
        outcome=result.outcome,
        counted=counted,
        passed=result.outcome == "pass",
        strict_outcome=result.strict_outcome,
        strict_passed=None if result.strict_outcome is None else result.strict_outcome == "pass",
        strict_why=result.strict_why,
        score=result.score if counted else None,
        metric=result.params.get("metric"),
        max_tokens=result.max_tokens,
        answer=result.answer,
        expected=json.dumps(list(result.expected)),
        prompt_tokens=prompt_tokens,
        prompt_tokens_source="usage" if usage_prompt else ("calibration" if prompt_tokens else None),
        calibrated_prompt_tokens=result.prompt_tokens,
        server_prompt_tokens=result.server_prompt_tokens,
        server_prompt_tokens_source=result.server_prompt_tokens_source,
        length_error_tokens=result.length_error_tokens,
        length_off_target=result.length_off_target,
        tokenizer=result.tokenizer,
        needle_token_offset=result.needle_token_offset,
        finish_reason=completion.finish_reason if completion else None,
        completion_tokens=completion.completion_tokens if completion else None,
        completion_tokens_source=completion.completion_tokens_source if completion else None,
        ttft_s=ttft,
        decode_gaps=len(completion.itl_s) if timed else None,
        decode_time_s=decode_time,
        latency_s=completion.latency_s if completion else None,
        prefill_tps=prompt_tokens / ttft if ttft and prompt_tokens else None,
        decode_tps=completion.decode_tokens_per_s if timed else None,
        miss_cause=result.coverage.cause if result.coverage else None,
        error=result.error,
        attempt=result.attempt,
        started_at=result.started_at,
        finished_at=result.finished_at,
    )
    for key, value in sorted(result.params.items()):
        row[f"param_{key}"] = json.dumps(value) if isinstance(value, dict | list | tuple) else value
    return row


_DTYPES = {
    "index_topk": "Int64",
    "target_tokens": "int64",
    "trial": "int64",
    "prompt_tokens": "Int64",
    "calibrated_prompt_tokens": "Int64",
    "server_prompt_tokens": "Int64",
    "length_error_tokens": "Int64",
    "length_off_target": "bool",
    "needle_token_offset": "Int64",
    "completion_tokens": "Int64",
    "max_tokens": "Int64",
    "decode_gaps": "Int64",
    "attempt": "int64",
    "counted": "bool",
    "passed": "bool",
    "strict_passed": "boolean",
    "interleaved": "bool",
}
_FLOATS = ("depth_percent", "score", "ttft_s", "decode_time_s", "latency_s", "prefill_tps", "decode_tps")


def frame_of(runs: Iterable[tuple[Run | None, Sequence[Result]]]) -> pd.DataFrame:
    """The results frame of runs already in memory: one row per (run, case), the last stored result winning.

    Rows are ordered by run, then suite, length, depth, trial, case id.
    """
    rows = []
    seen_runs: set[str] = set()
    for order, (run, results) in enumerate(runs):
        if run is not None:  # a run named twice (directly and through a compare) is read once
            if run.run_id in seen_runs:
                continue
            seen_runs.add(run.run_id)
        latest = {(result.variant, result.case_id): result for result in results}
        rows.extend({**result_row(run, result), "_run_order": order} for result in latest.values())
    frame = pd.DataFrame(rows, columns=[*RESULT_COLUMNS, "_run_order"] if not rows else None)
    for column in RESULT_COLUMNS:
        if column not in frame:
            frame[column] = None
    params = sorted(c for c in frame.columns if c.startswith("param_"))
    frame = frame.sort_values(
        ["_run_order", "suite", "target_tokens", "depth_percent", "trial", "case_id"], kind="stable"
    )
    frame = frame[[*RESULT_COLUMNS, *params]].reset_index(drop=True)
    frame = frame.astype({k: v for k, v in _DTYPES.items()})
    return frame.astype({k: "float64" for k in _FLOATS})


def check_scoring(value: str | None) -> Scoring:
    """--scoring as given (None: lenient); BadInput for anything else."""
    if value is None:
        return "lenient"
    if value not in SCORINGS:
        raise BadInput(f"--scoring {value!r}: pick one of {', '.join(SCORINGS)} (README, Scoring)")
    return value  # type: ignore[return-value]


def headline_frame(frame: pd.DataFrame, scoring: Scoring = "lenient") -> pd.DataFrame:
    """The frame whose `outcome` and `passed` are the chosen headline verdict (README, "Scoring").

    Every report figure and gate reads `outcome`/`passed`; with `strict` they become the strict verdict
    (a result stored before strict scoring existed keeps its lenient one) and the lenient verdict stays
    in `lenient_outcome`/`lenient_passed`, so a report can show the other one beside the headline;
    `headline_scoring` names the choice.
    """
    scoring = check_scoring(scoring)
    if scoring == "lenient" or frame.empty:
        return frame.assign(
            lenient_outcome=frame["outcome"], lenient_passed=frame["passed"], headline_scoring=scoring
        )
    strict_outcome = frame["strict_outcome"].where(frame["strict_outcome"].notna(), frame["outcome"])
    strict_passed = frame["strict_passed"].astype("boolean").fillna(frame["passed"]).astype(bool)
    return frame.assign(
        lenient_outcome=frame["outcome"],
        lenient_passed=frame["passed"],
        outcome=strict_outcome,
        passed=strict_passed,
        error=frame["strict_why"].where(frame["strict_why"].notna(), frame["error"]),
        headline_scoring=scoring,
    )


def without_baselines(frame: pd.DataFrame) -> pd.DataFrame:
    """The rows a headline, an effective length or a gate is computed over: no-context baselines
    (recall_eval.types.is_baseline) are shown beside their suites, never pooled in."""
    if frame.empty:
        return frame
    return frame[~frame["suite"].map(is_baseline).astype(bool)]


def run_dirs(paths: str | Path | Iterable[str | Path]) -> list[Path]:
    """Run directories named by paths: a run dir stays, a compare dir expands to its runs (in order)."""
    if isinstance(paths, str | Path):
        paths = [paths]
    found: list[Path] = []
    seen: set[Path] = set()
    for item in paths:
        path = named_dir(item)  # a bare id as `recall-eval runs` prints it names its directory
        if path.name in (RUN_FILE, COMPARE_FILE) and path.is_file():  # the file names its directory
            path = path.parent
        if (path / RUN_FILE).is_file():
            named = [path]
        elif (path / COMPARE_FILE).is_file():
            named = [run_dir_of(path, variant) for variant in read_manifest(path).variants]
        else:
            raise BadInput(
                f"{path} is neither a run directory (no {RUN_FILE}) nor a compare directory "
                f"(no {COMPARE_FILE}); `recall-eval runs` lists them"
            )
        for run_dir in named:  # one row set per run however often it is named
            if run_dir.resolve() not in seen:
                seen.add(run_dir.resolve())
                found.append(run_dir)
    return found


def results_frame(run_or_runs: str | Path | Iterable[str | Path]) -> pd.DataFrame:
    """One row per case of the given run directories (compare directories expand to their runs).

    Columns: RESULT_COLUMNS in that order, then param_<key> for the suites' parameters (see README,
    "Results as data"). Several runs are concatenated; `run_id` tells them apart.
    """
    stores = [RunStore.open(path) for path in run_dirs(run_or_runs)]
    return frame_of((store.run, store.results()) for store in stores)


def planned_cases(run: Run) -> int | None:
    """Cases a run's spec asks for: run.json's cases_planned (counted from the suites' cases by the
    library). A run written before that was recorded: lengths x depths x trials per suite, which every
    generated suite makes; None when it holds a file suite (`ruler-jsonl:`, `jsonl:`: as many as rows)."""
    if run.cases_planned is not None:
        return run.cases_planned
    spec = run.spec
    if any(name.startswith(FILE_SUITE_PREFIXES) for name in spec.suites):
        return None
    return len(spec.suites) * len(spec.lengths) * len(spec.depths) * spec.trials


def runs_frame(run_or_runs: str | Path | Iterable[str | Path]) -> pd.DataFrame:
    """One row per run directory (compare directories expand): RUN_COLUMNS."""
    rows = []
    for path in run_dirs(run_or_runs):
        store = RunStore.open(path)
        run, spec = store.run, store.run.spec
        fields = _run_fields(run)
        fields.pop("run_id")
        rows.append(
            {
                "run_id": run.run_id,
                "run_dir": str(path),
                **fields,
                "status": run.status,
                "suites": ",".join(spec.suites),
                "lengths": ",".join(str(n) for n in spec.lengths),
                "depths": ",".join(f"{d:g}" for d in spec.depths),
                "trials": spec.trials,
                "seed": spec.seed,
                "planned": planned_cases(run),
                "stored": len(store.final_case_ids()),
                "created_at": run.created_at,
                "finished_at": run.finished_at,
                "time_to_ready_s": run.time_to_ready_s,
            }
        )
    return pd.DataFrame(rows, columns=list(RUN_COLUMNS)).astype({"index_topk": "Int64", "planned": "Int64"})


def export_frame(frame: pd.DataFrame, fmt: ExportFormat, out: Path | None = None) -> bytes | None:
    """Write frame as csv, parquet or jsonl (one JSON object per line) to out; returns the bytes if out is None.

    Parquet keeps the column types; csv and jsonl write missing values as empty / null.
    """
    if fmt not in EXPORT_FORMATS:
        raise UserError(f"unknown export format {fmt!r}; pick one of {', '.join(EXPORT_FORMATS)}")
    if fmt == "csv":
        data = frame.to_csv(index=False).encode("utf-8")
    elif fmt == "jsonl":
        data = frame.to_json(orient="records", lines=True).encode("utf-8") if len(frame) else b""
    else:
        import io

        buffer = io.BytesIO()
        frame.to_parquet(buffer, index=False)
        data = buffer.getvalue()
    if out is None:
        return data
    write_export(Path(out), data, fmt)
    return None


def check_export_path(out: Path, fmt: str) -> None:
    """BadInput, before anything is read or written, for an --out that cannot be a file: a directory,
    or a file in a folder that does not exist."""
    if out.is_dir():
        raise BadInput(f"--out {out} is a directory; give a file to write, e.g. {out / f'results.{fmt}'}")
    if not out.parent.is_dir():
        raise BadInput(
            f"--out {out}: the folder {out.parent} does not exist; create it first (mkdir -p {out.parent})"
        )


def write_export(out: Path, data: bytes, fmt: str) -> None:
    """Write `data` to `out` whole (a temporary file beside it, renamed over it); nothing is left
    behind when it fails."""
    check_export_path(out, fmt)
    tmp = out.with_name(f".{out.name}.{os.getpid()}.tmp")
    try:
        tmp.write_bytes(data)
        tmp.replace(out)
    except OSError as err:
        tmp.unlink(missing_ok=True)
        raise UserError(f"cannot write {out}: {err.strerror or err}; check --out") from None
