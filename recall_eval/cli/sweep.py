"""`recall-eval sweep`: run the recall grid against a server and render the report."""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Annotated, Any

import typer

import suites
from recall_eval.cli.app import app, console
from recall_eval.cli.common import (
    OVERRIDE_FLAGS,
    external_profile,
    open_in_browser,
    profile_overrides,
    render_report,
    resume_command,
    run_versions,
    summary_line,
)
from recall_eval.cli.sweep_flow import StopMessages, check_reachable, run_recorded
from recall_eval.errors import BadInput, UserError
from recall_eval.grid import parse_depths, parse_lengths, parse_suites
from recall_eval.reuse import key_mismatch
from recall_eval.store import RunStore, new_run_id, runs_home
from recall_eval.types import Profile, Run, RunSpec

DEFAULT_PROFILE = "reference"
DEFAULT_LENGTHS = "338..22597"
DEFAULT_DEPTHS = "0..100:5"
_RUN_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


def _positive(name: str, value: float | None, minimum: float = 1) -> None:
    if value is not None and value < minimum:
        raise BadInput(f"{name} {value:g}: must be at least {minimum:g}")


def _spec(options: dict[str, Any]) -> RunSpec:
    known = tuple(sorted(suites.SUITES))
    return RunSpec(
        suites=parse_suites(options["suite"] or "needle", known),
        lengths=parse_lengths(options["lengths"] or DEFAULT_LENGTHS),
        depths=parse_depths(options["depths"] or DEFAULT_DEPTHS),
        trials=options["trials"] or 2,
        seed=options["seed"] if options["seed"] is not None else 0,
        max_tokens=options["max_tokens"] or 32,
        concurrency=options["concurrency"] or 1,
        request_timeout_s=options["request_timeout"] or 600.0,
        variant=options["variant"] or "default",
        capture_indexer=options["capture_indexer"],
    )


def with_capture(profile: Profile, capture: bool) -> Profile:
    """A launched server must be started with --enable-return-indexer-topk to return selections."""
    if not capture or profile.engine == "external":
        return profile
    if profile.pd:
        raise BadInput(
            f"--capture-indexer: profile {profile.name!r} is PD-disaggregated; its decode server never computes "
            "the prompt positions, so their indexer rows are not its own. Use a single-server profile"
        )
    return profile.model_copy(update={"enable_return_indexer_topk": True})


def _profile(options: dict[str, Any], overrides: dict[str, Any]) -> Profile:
    if options["base_url"]:
        if options["profile"] or any(value is not None for value in overrides.values()):
            raise BadInput("--base-url targets a running server: drop --profile and the profile overrides")
        return external_profile(options["base_url"], options["model"])
    from launchers.profiles import resolve_profile

    return resolve_profile(options["profile"] or DEFAULT_PROFILE, overrides, options["profiles_file"])


def _new_store(spec: RunSpec, profile: Profile, out: str | None) -> RunStore:
    root, run_id = runs_home(), new_run_id(spec)
    if out:
        if "/" in out or Path(out).is_dir():
            root = Path(out)
        elif _RUN_ID.fullmatch(out):
            run_id = out
        else:
            raise BadInput(f"--out {out!r}: give a directory (runs are created inside it) or a run id")
    run = Run(run_id=run_id, spec=spec, profile=profile, versions=run_versions(spec), created_at=time.time())
    return RunStore.create(run, root)


def _resumed_store(
    resume: Path, options: dict[str, Any], overrides: dict[str, Any]
) -> tuple[RunStore, Profile]:
    store = RunStore.open(resume)
    fixed = ("lengths", "depths", "trials", "seed", "suite", "max_tokens", "variant", "profile", "out")
    given = [name for name in fixed if options[name] is not None]
    given += ["capture_indexer"] if options["capture_indexer"] else []
    given += [
        OVERRIDE_FLAGS.get(name, name)
        for name, value in overrides.items()
        if value is not None and name != "port"
    ]
    if given:
        flags = ", ".join("--" + name.replace("_", "-") for name in given)
        raise BadInput(f"--resume reuses the run's own spec and profile: drop {flags}")
    profile = store.run.profile
    if profile is None:
        raise UserError(f"{resume}/run.json has no profile; it cannot be resumed")
    stored = store.run.versions
    prompts_key = {
        name: value
        for name, value in run_versions(store.run.spec).items()
        if name != "recall-eval" and name in stored
    }
    changed = key_mismatch(stored, prompts_key) if "prompts" in prompts_key else None
    if changed:
        raise BadInput(
            f"--resume {resume}: the suites changed since this run started ({changed}); its cases would mix "
            "old and new prompts. Start a new sweep"
        )
    if options["base_url"]:
        profile = profile.model_copy(
            update={"engine": "external", "base_url": options["base_url"].rstrip("/")}
        )
    elif overrides.get("port") is not None:  # the port does not change results: a busy one may be swapped
        profile = profile.model_copy(update={"port": overrides["port"]})
    updates: dict[str, Any] = {}
    if options["concurrency"] is not None:
        updates["concurrency"] = options["concurrency"]
    if options["request_timeout"] is not None:
        updates["request_timeout_s"] = options["request_timeout"]
    run = store.run.model_copy(
        update={"spec": store.run.spec.model_copy(update=updates), "status": "running", "note": None}
    )
    store.write_run(run)
    return store, profile


@app.command()
def sweep(
    lengths: Annotated[
        str | None,
        typer.Option(
            help=f"Context lengths: A..B (8 geometric points), A..B:N, or A,B,C. (default: {DEFAULT_LENGTHS})"
        ),
    ] = None,
    depths: Annotated[
        str | None,
        typer.Option(help=f"Needle depths in percent: A..B:N (linear) or A,B,C. (default: {DEFAULT_DEPTHS})"),
    ] = None,
    trials: Annotated[
        int | None, typer.Option(help="Independent needles per (length, depth) cell. (default: 2)")
    ] = None,
    seed: Annotated[int | None, typer.Option(help="Seed of every generated case. (default: 0)")] = None,
    concurrency: Annotated[int | None, typer.Option(help="Requests in flight at once. (default: 1)")] = None,
    max_tokens: Annotated[
        int | None, typer.Option("--max-tokens", help="Answer budget in tokens. (default: 32)")
    ] = None,
    suite: Annotated[str | None, typer.Option(help="Comma-separated suites. (default: needle)")] = None,
    out: Annotated[
        str | None, typer.Option(help="Directory to create the run in, or the run id to use.")
    ] = None,
    resume: Annotated[Path | None, typer.Option(help="Finish an interrupted run (its directory).")] = None,
    base_url: Annotated[
        str | None, typer.Option("--base-url", help="A running server (OpenAI-compatible); no launch.")
    ] = None,
    model: Annotated[
        str | None, typer.Option(help="Model name to send to --base-url. (default: the first one served)")
    ] = None,
    profile: Annotated[
        str | None, typer.Option(help=f"Server profile to launch. (default: {DEFAULT_PROFILE})")
    ] = None,
    index_k_dtype: Annotated[
        str | None, typer.Option("--index-k-dtype", help="Profile override: fp8 or bf16.")
    ] = None,
    index_topk: Annotated[
        int | None, typer.Option("--index-topk", help="Profile override: DSA index_topk.")
    ] = None,
    mem_fraction: Annotated[
        float | None, typer.Option("--mem-fraction", help="Profile override: mem_fraction_static.")
    ] = None,
    context_length: Annotated[
        int | None, typer.Option("--context-length", help="Profile override: context length.")
    ] = None,
    model_path: Annotated[
        str | None, typer.Option("--model-path", help="Profile override: model path.")
    ] = None,
    tp: Annotated[int | None, typer.Option(help="Profile override: tensor parallel size.")] = None,
    port: Annotated[int | None, typer.Option(help="Profile override: the launched server's port.")] = None,
    profiles_file: Annotated[
        Path | None, typer.Option("--profiles-file", help="TOML file with more profiles.")
    ] = None,
    variant: Annotated[
        str | None, typer.Option(help="Label of this run in reports and comparisons. (default: default)")
    ] = None,
    request_timeout: Annotated[
        float | None, typer.Option("--request-timeout", help="Seconds per request. (default: 600)")
    ] = None,
    capture_indexer: Annotated[
        bool,
        typer.Option(
            "--capture-indexer",
            help="Ask SGLang's /generate for the DSA indexer's selections and record, per indexer layer, "
            "whether the needle was selected (misses get a cause: selection or generation).",
        ),
    ] = False,
    open_report: Annotated[bool, typer.Option("--open", help="Open the report in the browser.")] = False,
    no_report: Annotated[
        bool, typer.Option("--no-report", help="Do not render the report at the end.")
    ] = False,
) -> None:
    """Run the recall grid (suites x lengths x depths x trials) and write a report."""
    options = dict(locals())
    overrides = profile_overrides(options)
    for name in ("trials", "concurrency", "max_tokens"):
        _positive("--" + name.replace("_", "-"), options[name])
    _positive("--request-timeout", request_timeout, minimum=0.001)
    if resume is not None:
        store, target_profile = _resumed_store(resume, options, overrides)
        _check_target(target_profile)
    else:
        spec = _spec(options)
        target_profile = with_capture(_profile(options, overrides), capture_indexer)
        _check_target(target_profile)  # before a run directory exists: nothing to resume
        store = _new_store(spec, target_profile, out)
        console.print(f"run {store.run.run_id} -> {store.path}")
    _execute(store, target_profile, open_report=open_report, no_report=no_report)


def _check_target(profile: Profile) -> None:
    """An external server must answer; a profile to launch must pass the preflight (engine importable,
    GPUs, ports, model path), each failure one line with its fix."""
    if profile.engine == "external":
        check_reachable(profile)
        return
    from launchers.preflight import require_preflight

    require_preflight(profile)


def _execute(store: RunStore, profile: Profile, open_report: bool, no_report: bool) -> None:
    resume = resume_command(store.path)
    run_recorded(
        store,
        profile,
        console,
        StopMessages(
            interrupted=f"[yellow]interrupted[/yellow]: resume with: {resume}",
            stopped=lambda err: f"{err}: {resume}",
            # bad input is in the stored spec, so a resume would fail the same way
            failed=lambda err: (
                f"{err} (run {store.path} marked failed; start a new sweep)"
                if isinstance(err, BadInput)
                else f"{err} (resume with: {resume})"
            ),
        ),
    )
    results = store.results()
    if no_report:
        print(store.path)
    else:
        report = render_report(store.path)
        print(report)
        if open_report:
            open_in_browser(report)
    console.print(summary_line(results), highlight=False)
