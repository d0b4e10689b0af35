"""`recall-eval sweep`: parse the options, call recall_eval.api.sweep (or resume), print the outcome."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from recall_eval import api
from recall_eval.api.options import DEFAULT_GRID, DEFAULT_VARIANT
from recall_eval.cli import options as opt
from recall_eval.cli.app import app, console, interrupted_exit_code, interrupted_word, say
from recall_eval.cli.common import open_in_browser, resume_command
from recall_eval.errors import BadInput, UserError

if TYPE_CHECKING:
    from recall_eval.exit_codes import RecallGate


@app.command()
def sweep(
    lengths: opt.Lengths = None,
    depths: opt.Depths = None,
    trials: opt.Trials = None,
    seed: opt.Seed = None,
    concurrency: opt.Concurrency = None,
    max_tokens: opt.MaxTokens = None,
    suite: opt.Suite = None,
    out: Annotated[
        str | None, typer.Option(help="Directory to create the run in, or the run id to use.")
    ] = None,
    resume: Annotated[Path | None, typer.Option(help="Finish an interrupted run (its directory).")] = None,
    base_url: Annotated[
        list[str] | None,
        typer.Option(
            "--base-url",
            metavar="URL",
            help="A running server (OpenAI-compatible); no launch. Repeat it (or separate with commas) for "
            "replicas of one model: the cases are spread over them, --concurrency requests each.",
        ),
    ] = None,
    model: opt.Model = None,
    profile: opt.ProfileName = None,
    index_k_dtype: opt.IndexKDtype = None,
    index_topk: opt.IndexTopk = None,
    mem_fraction: opt.MemFraction = None,
    context_length: opt.ContextLength = None,
    model_path: opt.ModelPath = None,
    tp: opt.Tp = None,
    port: opt.Port = None,
    profiles_file: opt.ProfilesFile = None,
    variant: Annotated[
        str | None,
        typer.Option(help=f"Label of this run in reports and comparisons. (default: {DEFAULT_VARIANT})"),
    ] = None,
    request_timeout: opt.RequestTimeout = None,
    api_key: opt.ApiKey = None,
    header: opt.Header = None,
    reasoning_effort: opt.ReasoningEffort = None,
    chat_template_kwargs: opt.ChatTemplateKwargs = None,
    extra_body: opt.ExtraBody = None,
    capture_indexer: Annotated[
        bool,
        typer.Option(
            "--capture-indexer",
            help="Ask SGLang's /generate for the DSA indexer's selections and record, per indexer layer, "
            "whether the needle was selected (misses get a cause: selection or generation).",
        ),
    ] = False,
    open_report: opt.OpenReport = False,
    no_report: Annotated[
        bool, typer.Option("--no-report", help="Do not render the report at the end.")
    ] = False,
    scoring: opt.Scoring = None,
    fail_under: Annotated[
        str | None,
        typer.Option(
            "--fail-under",
            help="Exit 4 when recall is below this: overall (0.95), per suite (needle=0.98,config=0.8), "
            "or both. For CI gating of a kernel or precision change.",
        ),
    ] = None,
    retry: Annotated[
        str | None,
        typer.Option(
            help="With --resume: run the cases whose outcome is one of these again (e.g. error,timeout); "
            "earlier attempts stay in results.jsonl, the latest counts."
        ),
    ] = None,
    stop_leftovers: Annotated[
        bool,
        typer.Option(
            "--stop-leftovers",
            help="With --resume: stop a server of this run that outlived its harness (else the resume refuses).",
        ),
    ] = False,
) -> None:
    """Run the recall grid (suites x lengths x depths x trials) and write a report.

    Exit codes: 0 finished (and --fail-under met); 1 could not run or stopped early; 2 bad input;
    3 no case got an answer from a live model; 4 recall below --fail-under; 130 interrupted."""
    from recall_eval.api.sweeping import resume_options
    from recall_eval.cli.display import ConsoleHooks
    from recall_eval.exit_codes import verdict

    options = api.SweepOptions(
        grid=api.GridOptions(
            suites=suite, lengths=lengths, depths=depths, trials=trials, seed=seed, max_tokens=max_tokens
        ),
        request=api.RequestOptions(
            concurrency=concurrency,
            request_timeout_s=request_timeout,
            api_key=api_key,
            headers=header,
            reasoning_effort=reasoning_effort,
            chat_template_kwargs=chat_template_kwargs,
            extra_body=extra_body,
        ),
        target=api.TargetOptions(
            profile=profile,
            profiles_file=profiles_file,
            base_url=base_url,
            model=model,
            index_k_dtype=index_k_dtype,
            index_topk=index_topk,
            mem_fraction_static=mem_fraction,
            context_length=context_length,
            model_path=model_path,
            tp=tp,
            port=port,
        ),
        variant=variant,
        out=out,
        capture_indexer=capture_indexer,
        render_report=not no_report,
        scoring=scoring,
    )
    if resume is None and (retry or stop_leftovers):
        raise BadInput(
            f"{'--retry' if retry else '--stop-leftovers'} applies to a resumed run: add --resume RUN_DIR"
        )
    gate = _gate(fail_under, resume, suite)  # bad input fails here, before anything starts
    hooks = ConsoleHooks(console)
    try:
        if resume is not None:
            again = dataclasses.replace(resume_options(options), retry=retry, stop_leftovers=stop_leftovers)
            record = api.resume(resume, again, hooks=hooks)
        else:
            record = api.sweep(options, hooks=hooks)
    except api.RunInterrupted as stop:
        say(f"resume with: {resume_command(stop.run_dir)}", f"{interrupted_word()}:", "yellow")
        raise typer.Exit(interrupted_exit_code()) from None
    except api.RunStopped as stop:
        raise _stopped_error(stop) from stop
    if record.report is None or no_report:
        print(record.path)
    else:
        print(record.report)
        if open_report:
            open_in_browser(record.report)
    ending = verdict(record.results, gate, scoring=record.run.scoring)
    for line in ending.lines:
        say(line, style="red")
    if ending.exit_code:
        raise typer.Exit(ending.exit_code)


def _gate(fail_under: str | None, resume: Path | None, suite: str | None) -> RecallGate | None:
    """--fail-under against the run's suites (a resumed run's own, else --suite or the default)."""
    import suites
    from recall_eval.exit_codes import parse_fail_under
    from recall_eval.grid import parse_suites
    from recall_eval.store import RunStore

    if fail_under is None:
        return None
    if resume is not None:
        names: tuple[str, ...] = RunStore.open(resume).run.spec.suites
    else:
        names = parse_suites(suite or str(DEFAULT_GRID.suites), tuple(sorted(suites.SUITES)))
    return parse_fail_under(fail_under, names)


def _stopped_error(stop: api.RunStopped) -> UserError:
    """The one line for a run that ended early: how to finish it, or why a resume would not help."""
    resume = resume_command(stop.run_dir)
    if stop.gave_up:
        return UserError(f"{stop}: {resume}")
    if stop.bad_input:  # bad input is in the stored spec, so a resume would fail the same way
        return BadInput(f"{stop} (run {stop.run_dir} marked failed; start a new sweep)")
    return UserError(f"{stop} (resume with: {resume})", stop.exit_code)
