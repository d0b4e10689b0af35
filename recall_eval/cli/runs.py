"""`recall-eval runs`: the runs and compare directories under the runs home, as tables or JSON."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from recall_eval import api
from recall_eval.cli.app import app
from recall_eval.engines import launched
from recall_eval.formatting import percent, score_points
from recall_eval.store import runs_home
from recall_eval.target_facts import target_facts

if TYPE_CHECKING:
    from recall_eval.api.reading import CompareEntry, Leftover
    from recall_eval.store import UnreadableRun

RUN_COLUMNS = (
    "id", "status", "variant", "profile", "index K/topk", "suites", "lengths", "cases", "recall", "created",
)  # fmt: skip
# narrower than this, `created` is left out of the table (a run id begins with its UTC creation time)
WIDE_ENOUGH_FOR_CREATED = 130
LONGEST_URL = 10  # the profile column (a URL for an external server) may fold down to this width


def _lengths_text(lengths: tuple[int, ...]) -> str:
    if len(lengths) <= 3:
        return ",".join(str(length) for length in lengths)
    return f"{lengths[0]}..{lengths[-1]} ({len(lengths)})"


def _when(stamp: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(stamp))


def _target(record: api.RunRecord) -> dict[str, Any]:
    """Profile name, index-K dtype and index_topk: what the run launched or learned, else None."""
    profile = record.profile
    if profile is None:
        return {"profile": None, "engine": None, "base_url": None, "index_k_dtype": None, "index_topk": None}
    facts = target_facts(record.run)  # launched or learned from /server_info; None: unknown
    return {
        "profile": profile.name,
        "engine": profile.engine,
        "base_url": profile.base_url or record.run.server_info.get("base_url"),
        "index_k_dtype": facts.index_k_dtype,
        "index_topk": facts.index_topk,
    }


def run_json(record: api.RunRecord) -> dict[str, Any]:
    spec = record.run.spec
    return {
        "run_id": record.run_id,
        "path": str(record.path),
        "status": record.status,  # as stored in run.json
        "status_now": record.status_now,  # `interrupted (no process)` when a running run's process is gone
        "variant": record.variant,
        **_target(record),
        "suites": list(spec.suites),
        "lengths": list(spec.lengths),
        "depths": list(spec.depths),
        "trials": spec.trials,
        "seed": spec.seed,
        "cases_done": record.cases_done,
        "cases_total": record.cases_total,
        "passes": record.passes,
        "answered": record.answered,
        "recall": record.recall,  # pass/miss suites only
        "score": record.score,  # scored suites: mean score in [0, 1]
        "created_at": record.run.created_at,
        "finished_at": record.run.finished_at,
        "report": str(record.report) if record.report else None,
        "unreadable_lines": [{"line": item.line, "reason": item.reason} for item in record.unreadable],
    }


def compare_json(entry: CompareEntry) -> dict[str, Any]:
    return {
        "compare_id": entry.compare_id,
        "path": str(entry.path),
        "variants": [
            {"label": label, "run_dir": str(run_dir)}
            for label, run_dir in zip(entry.labels, entry.run_dirs, strict=True)
        ],
        "command": entry.command,
        "created_at": entry.created_at,
        "report": str(entry.report) if entry.report else None,
    }


def _run_row(record: api.RunRecord) -> list[str]:
    target = _target(record)
    profile = target["profile"] or "-"
    if record.profile is not None and not launched(record.profile):  # a running server: named by its URL
        profile = target["base_url"] or "external"
    topk = target["index_topk"]
    passes, answered, score = record.passes, record.answered, record.score
    frame = record.frame
    plain = (
        frame.loc[frame["metric"].isna(), "suite"].nunique()
        if "metric" in frame
        else frame["suite"].nunique()
    )
    figures = [  # recall of the pass/miss suites (pooled when several), the scored suites' mean score
        f"{percent(record.recall)}{' pooled' if plain > 1 else ''} ({passes}/{answered})" if answered else "",
        f"score {score_points(score)}" if score is not None else "",
    ]
    dtype = target["index_k_dtype"]
    return [
        record.run_id,
        record.status_now,
        record.variant,
        profile,
        "unknown"
        if dtype is None and topk is None
        else f"{dtype or '?'}/{topk if topk is not None else '?'}",
        ", ".join(record.run.spec.suites),  # a space: the cell wraps between suites
        _lengths_text(record.run.spec.lengths),
        f"{record.cases_done}/{record.cases_total if record.cases_total is not None else '?'}",
        ", ".join(figure for figure in figures if figure) or "-",
        _when(record.run.created_at),
    ]


def _console() -> Console:
    """A terminal's own width; piped, $COLUMNS when set, else 200 (tables kept whole for programs)."""
    out = Console(highlight=False)
    if out.is_terminal:
        return out
    columns = os.environ.get("COLUMNS", "")
    return Console(width=int(columns) if columns.isdigit() else 200, highlight=False)


def _table(title: str, columns: tuple[str, ...], rows: list[list[str]]) -> Table:
    """A table that stays readable at 100 columns: no vertical rules; a cell wraps between its words
    and is never cut (`fi…`): each column is at least as wide as its longest word (a URL may fold
    down to LONGEST_URL); ids never wrap (they are copied into commands)."""
    table = Table(  # title and cells as Text: labels and paths are the user's (`cand[/x]` is not markup)
        title=Text(title),
        box=box.SIMPLE_HEAD,
        padding=(0, 0),  # the box's blank divider is the one space between columns
        show_edge=False,
        title_justify="left",
    )
    for index, column in enumerate(columns):
        words = [word for row in rows for word in row[index].split()] + column.split()
        longest = max((len(word) for word in words), default=1)
        table.add_column(
            column,
            no_wrap=column == "id",
            overflow="fold",
            min_width=min(longest, LONGEST_URL) if column == "profile" else longest,
        )
    for row in rows:
        table.add_row(*(Text(cell) for cell in row))
    return table


@app.command()
def runs(
    home: Annotated[
        Path | None, typer.Option("--home", help="Where runs live. (default: $RECALL_EVAL_HOME or ./runs)")
    ] = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print one JSON object (runs and compares) for scripts.")
    ] = False,
    stop_leftovers: Annotated[
        bool,
        typer.Option(
            "--stop-leftovers",
            help="Stop servers that outlived the harness that started them (listed under the table).",
        ),
    ] = False,
) -> None:
    """List runs (id, status, variant, profile, index-K dtype, index_topk, suites, lengths, cases done,
    recall, created) and compare directories (variants and their runs). A run or compare that cannot be
    read (a newer format, a damaged run.json or compare.json) is listed with the reason, as is each
    results.jsonl line that cannot be read (kept in the file, not counted)."""
    from recall_eval.api.reading import leftover_servers

    root = home if home is not None else runs_home()
    stored, compared = api.runs(root), api.compares(root)
    unreadable, unreadable_compares = api.unreadable_runs(root), api.unreadable_compares(root)
    leftovers = {record.run_id: leftover_servers(record.path) for record in stored}
    if as_json:
        payload = {
            "home": str(root),
            "runs": [
                {
                    **run_json(record),
                    "leftover_servers": [_leftover_json(x) for x in leftovers[record.run_id]],
                }
                for record in stored
            ],
            "unreadable_runs": [{"path": str(item.path), "reason": item.reason} for item in unreadable],
            "compares": [compare_json(entry) for entry in compared],
            "unreadable_compares": [
                {"path": str(item.path), "reason": item.reason} for item in unreadable_compares
            ],
        }
        print(json.dumps(payload, indent=2))
        return
    out = _console()
    if not stored and not compared and not unreadable and not unreadable_compares:
        out.print(f"no runs in {root}", markup=False)
        return
    if stored:
        shown = RUN_COLUMNS if out.width >= WIDE_ENOUGH_FOR_CREATED else RUN_COLUMNS[:-1]
        rows = [_run_row(record)[: len(shown)] for record in stored]
        out.print(_table(f"runs in {root}", shown, rows))
        _report_leftovers(out, leftovers, stop_leftovers)
    _report_unreadable(out, stored, unreadable)
    if compared:
        rows = [
            [
                entry.compare_id,
                ", ".join(entry.labels),
                ", ".join(run_dir.name for run_dir in entry.run_dirs),
                _when(entry.created_at),
            ]
            for entry in compared
        ]
        out.print(_table(f"compares in {root}", ("id", "variants (baseline first)", "runs", "created"), rows))
    for item in unreadable_compares:
        out.print(
            Text.assemble(("unreadable compare:", "yellow"), f" {item.path.name}: {item.reason}"),
            soft_wrap=True,
        )


def _report_unreadable(out: Console, stored: list[api.RunRecord], unreadable: list[UnreadableRun]) -> None:
    """One line per run that cannot be read (with why) and per stored result line that cannot."""
    for item in unreadable:
        out.print(
            Text.assemble(("unreadable:", "yellow"), f" {item.path.name}: {item.reason}"), soft_wrap=True
        )
    for record in stored:
        for line in record.unreadable:
            out.print(
                Text.assemble(("unreadable:", "yellow"), f" run {record.run_id}: {line.describe()}"),
                soft_wrap=True,
            )


def _leftover_json(leftover: Leftover) -> dict[str, Any]:
    record = leftover.record
    return {
        "name": record.name,
        "process_group": record.pid,
        "port": record.port,
        "pids": list(leftover.pids),
    }


def _report_leftovers(out: Console, leftovers: dict[str, list[Leftover]], stop: bool) -> None:
    """One line per server that outlived its harness: stopped with --stop-leftovers, else how to."""
    from recall_eval.api.reading import stop_leftover_server

    for run_id, found in leftovers.items():
        for leftover in found:
            if not stop:
                out.print(
                    Text.assemble(
                        ("leftover:", "yellow"),
                        f" run {run_id}: {leftover.describe()}; stop it with `recall-eval runs --stop-leftovers`",
                    )
                )
            elif stop_leftover_server(leftover):
                out.print(
                    f"stopped: run {run_id}: {leftover.describe().replace(' is still running', '')}",
                    markup=False,
                )
            else:
                out.print(Text.assemble(("could not stop", "red"), f" run {run_id}: {leftover.describe()}"))
