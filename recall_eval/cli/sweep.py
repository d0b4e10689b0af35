"""`recall-eval sweep`: parse the options, call recall_eval.api.sweep (or resume), print the outcome."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from recall_eval import api
from recall_eval.api.options import ResumeOptions, SweepOptions
from recall_eval.cli.app import app, console, interrupted_exit_code, interrupted_word, say
from recall_eval.cli.options import OpenReport, only, takes_options
from recall_eval.errors import BadInput, UserError


@app.command()
@takes_options
def sweep(
    options: SweepOptions,
    again: Annotated[ResumeOptions, only("retry", "stop_leftovers")],
    resume: Annotated[
        Path | None, typer.Option(help="Finish an interrupted run (its directory or its run.json).")
    ] = None,
    open_report: OpenReport = False,
) -> None:
    """Run the recall grid (suites x lengths x depths x trials) and write a report.

    With --lengths search:MIN..MAX[:BUDGET], find the cliff instead: the longest length whose recall stays
    at or above 0.9, by bisection on a log scale, adding --trials per step at a length until its 95% Wilson
    interval is clearly above or below 0.9 or BUDGET trials (default 12) are spent; prints the bracket, the
    cases spent and what the full grid over the range would spend.

    Exit codes: 0 finished (and --fail-under met); 1 could not run or stopped early; 2 bad input;
    3 no case got an answer from a live model; 4 recall below --fail-under, or significantly worse than
    --baseline (also when --fail-fast stopped it); 5 every answer was cut inside the model's reasoning
    (raise --max-tokens); 130 interrupted (143 after SIGTERM).

    As a CI gate: `recall-eval sweep --base-url URL --baseline ci/base.json --junit junit.xml`
    (`recall-eval baseline save RUN NAME` writes the baseline); every option can come from a run file
    (--config run.toml)."""
    from recall_eval.api.sweeping import resume_options
    from recall_eval.cli.common import open_in_browser, resume_command
    from recall_eval.cli.display import ConsoleHooks

    if resume is None and (again.retry or again.stop_leftovers):
        raise BadInput(
            f"{'--retry' if again.retry else '--stop-leftovers'} applies to a resumed run: add --resume RUN_DIR"
        )
    from recall_eval.cliff import is_search

    hooks = ConsoleHooks(console)
    if resume is None and is_search(options.grid.lengths):
        _search(options, hooks)
        return
    try:
        if resume is not None:
            record = api.resume(resume, resume_options(options, again), hooks=hooks)
        else:
            record = api.sweep(options, hooks=hooks)
    except api.RunInterrupted as stop:
        say(f"resume with: {resume_command(stop.run_dir)}", f"{interrupted_word()}:", "yellow")
        raise typer.Exit(interrupted_exit_code()) from None
    except api.RunStopped as stop:
        raise _stopped_error(stop) from stop
    if record.report is None or not options.render_report:
        print(record.path)
    else:
        print(record.report)
        if open_report:
            open_in_browser(record.report)
    ending = record.verdict
    for line in ending.lines:
        say(line, style="red")
    if ending.exit_code:
        raise typer.Exit(ending.exit_code)


def _search(options: SweepOptions, hooks: object) -> None:
    """--lengths search:MIN..MAX: the cliff's bracket and its cost on stderr, the search directory on stdout."""
    from recall_eval.api.searching import find_cliff

    try:
        record = find_cliff(options, hooks=hooks)  # type: ignore[arg-type]
    except api.RunInterrupted as stop:
        say("run the same search again to go on from the stored batches", f"{interrupted_word()}:", "yellow")
        raise typer.Exit(interrupted_exit_code()) from stop
    except api.RunStopped as stop:
        raise _stopped_error(stop) from stop
    for line in record.lines:
        say(line)
    print(record.path)


def _stopped_error(stop: api.RunStopped) -> UserError:
    """The one line for a run that ended early: how to finish it, or why a resume would not help."""
    from recall_eval.cli.common import resume_command

    resume = resume_command(stop.run_dir)
    if stop.gave_up:
        return UserError(f"{stop}: {resume}")
    if stop.bad_input:  # bad input is in the stored spec, so a resume would fail the same way
        return BadInput(f"{stop} (run {stop.run_dir} marked failed; start a new sweep)")
    return UserError(f"{stop} (resume with: {resume})", stop.exit_code)
