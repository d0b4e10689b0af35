"""`recall-eval sweep`: parse the options, call recall_eval.api.sweep (or resume), print the outcome."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from recall_eval import api
from recall_eval.api.options import DEFAULT_VARIANT
from recall_eval.api.sweeping import resume_options
from recall_eval.cli import options as opt
from recall_eval.cli.app import app, console
from recall_eval.cli.common import open_in_browser, resume_command
from recall_eval.cli.display import ConsoleHooks
from recall_eval.errors import BadInput, UserError


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
        str | None, typer.Option("--base-url", help="A running server (OpenAI-compatible); no launch.")
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
) -> None:
    """Run the recall grid (suites x lengths x depths x trials) and write a report."""
    options = api.SweepOptions(
        grid=api.GridOptions(
            suites=suite, lengths=lengths, depths=depths, trials=trials, seed=seed, max_tokens=max_tokens
        ),
        request=api.RequestOptions(concurrency=concurrency, request_timeout_s=request_timeout),
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
    )
    hooks = ConsoleHooks(console)
    try:
        if resume is not None:
            record = api.resume(resume, resume_options(options), hooks=hooks)
        else:
            record = api.sweep(options, hooks=hooks)
    except api.RunInterrupted as stop:
        console.print(f"[yellow]interrupted[/yellow]: resume with: {resume_command(stop.run_dir)}")
        raise typer.Exit(130) from None
    except api.RunStopped as stop:
        raise _stopped_error(stop) from stop
    if record.report is None or no_report:
        print(record.path)
    else:
        print(record.report)
        if open_report:
            open_in_browser(record.report)


def _stopped_error(stop: api.RunStopped) -> UserError:
    """The one line for a run that ended early: how to finish it, or why a resume would not help."""
    resume = resume_command(stop.run_dir)
    if stop.gave_up:
        return UserError(f"{stop}: {resume}")
    if stop.bad_input:  # bad input is in the stored spec, so a resume would fail the same way
        return BadInput(f"{stop} (run {stop.run_dir} marked failed; start a new sweep)")
    return UserError(f"{stop} (resume with: {resume})", stop.exit_code)
