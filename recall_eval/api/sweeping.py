"""sweep and resume: build the RunSpec and Profile from options, create or reopen the run directory,
run it (launching the server when a profile is given), render its report."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import suites
from recall_eval.api.baselines import check_baseline, parse_tolerance, with_baseline_defaults
from recall_eval.api.execute import planned_cases, run_recorded
from recall_eval.api.gating import recall_gate
from recall_eval.api.hooks import Hooks
from recall_eval.api.options import (
    DEFAULT_GRID,
    DEFAULT_PROFILE,
    DEFAULT_VARIANT,
    GridOptions,
    RequestOptions,
    ResumeOptions,
    SweepOptions,
    TargetOptions,
    check_ranges,
    flag_of,
    given,
    resolved,
    updated,
)
from recall_eval.api.records import RunRecord
from recall_eval.api.run_file import write_config
from recall_eval.api.targets import check_reachable, request_auth
from recall_eval.api.versions import changed_prompts, changed_scoring, run_versions
from recall_eval.baseline_store import read_baseline
from recall_eval.compare_store import COMPARE_FILE
from recall_eval.engines import launched
from recall_eval.errors import BadInput, UserError
from recall_eval.exit_codes import RecallGate, parse_retry, verdict
from recall_eval.formatting import settings_text
from recall_eval.frame import check_scoring
from recall_eval.grid import parse_depths, parse_lengths
from recall_eval.length_check import check_lengths_servable
from recall_eval.run_owner import owner_alive
from recall_eval.store import RUN_FILE, RunStore, new_run_id, runs_home
from recall_eval.thinking import THINKING_MAX_TOKENS, is_thinking_run
from recall_eval.types import Profile, RequestSettings, Run, RunSpec, request_knobs

if TYPE_CHECKING:
    from launchers.executors import Executor

_RUN_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


def _spec_text(value: str | Sequence[Any]) -> str:
    return value if isinstance(value, str) else ",".join(str(item) for item in value)


def check_request(request: RequestOptions) -> None:
    """BadInput for request options out of range (before anything starts)."""
    check_ranges(request)


def _json_object(flag: str, value: str | Mapping[str, Any] | None) -> dict[str, Any] | None:
    """A JSON-object option (text or a mapping) as a dict; BadInput for anything else."""
    if value is None or isinstance(value, Mapping):
        return dict(value) if value is not None else None
    try:
        parsed = json.loads(value)
    except ValueError as err:
        raise BadInput(
            f"{flag} {value!r}: not JSON ({err.msg}); write an object like '{{\"thinking\": true}}'"
        ) from None
    if not isinstance(parsed, dict):
        raise BadInput(f"{flag} {value!r}: must be a JSON object ({{...}}), not {type(parsed).__name__}")
    return parsed


def request_settings(request: RequestOptions) -> dict[str, Any]:
    """The RunSpec fields of the request settings (recall_eval.types.RequestSettings): given, else their
    defaults; a JSON object parsed (BadInput when malformed), an empty text or list unset."""
    values = {}
    for name, knob in request_knobs().items():
        value = getattr(request, name)
        if knob.json_object:
            value = _json_object(knob.flag, value)
        elif isinstance(value, list | tuple):
            value = tuple(value) or None
        elif value == "":
            value = None
        values[name] = RequestSettings.model_fields[name].default if value is None else value
    return values


def build_spec(
    grid: GridOptions, request: RequestOptions, variant: str | None = None, capture_indexer: bool = False
) -> RunSpec:
    """The RunSpec of a new run: given options, else the defaults (BadInput for a malformed one).

    A thinking run (a reasoning effort, or the template's thinking switch on) without --max-tokens gets
    THINKING_MAX_TOKENS: reasoning and answer share the budget. Without --max-tokens, suites whose cases
    carry their own budget (RULER's per task, mrcr's: suites.has_case_budgets) are sent with it, case by
    case (RunSpec.case_budgets); the other cases get the default max_tokens."""
    check_ranges(grid)
    check_request(request)
    settings = request_settings(request)
    auth = request_auth(request)
    thinking = is_thinking_run(RunSpec(lengths=(1,), depths=(0.0,), **settings))
    max_tokens_given = grid.max_tokens is not None
    names = suites.parse_suite_names(
        _spec_text(grid.suites if grid.suites is not None else DEFAULT_GRID.suites)
    )
    case_budgets = False
    if grid.max_tokens is None and thinking:
        grid = dataclasses.replace(grid, max_tokens=THINKING_MAX_TOKENS)
    elif grid.max_tokens is None:
        case_budgets = suites.has_case_budgets(names)  # RULER's answer budget per task, MRCR's
    grid = resolved(grid, DEFAULT_GRID)
    assert grid.suites and grid.lengths and grid.depths  # filled by the defaults
    return RunSpec(
        **settings,
        header_names=tuple(sorted(auth.headers)),
        api_key_used=bool(auth.api_key),
        suites=names,
        lengths=parse_lengths(_spec_text(grid.lengths)),
        depths=parse_depths(_spec_text(grid.depths)),
        trials=grid.trials,
        seed=grid.seed,
        max_tokens=grid.max_tokens,
        max_tokens_given=max_tokens_given,
        case_budgets=case_budgets,
        variant=variant or DEFAULT_VARIANT,
        capture_indexer=capture_indexer,
    )


def base_url_list(base_url: str | Sequence[str]) -> list[str]:
    """--base-url values as URLs: repeated, or comma-separated (replicas of one model)."""
    texts = [base_url] if isinstance(base_url, str) else list(base_url)
    return [url.strip() for text in texts for url in text.split(",") if url.strip()]


def external_profile(base_url: str | Sequence[str], model: str | None) -> Profile:
    """The target for a running server (or its replicas) given by base_url (BadInput for something
    that is not a URL)."""
    urls = base_url_list(base_url)
    for url in urls or [str(base_url)]:
        if not re.match(r"https?://[^/\s]+", url):
            raise BadInput(f"--base-url {url!r}: write a URL like http://127.0.0.1:30000")
    urls = [url.rstrip("/") for url in urls]
    if len(set(urls)) != len(urls):
        raise BadInput(f"--base-url: {', '.join(urls)} names a replica twice")
    return Profile(
        name="external",
        engine="external",
        base_url=urls[0],
        replica_base_urls=tuple(urls[1:]),
        served_model_name=model,
    )


def build_profile(target: TargetOptions) -> Profile:
    """The Profile to launch (the named profile with overrides), or the running server at base_url."""
    overrides = target.profile_overrides()
    if target.base_url:
        if target.profile or any(value is not None for value in overrides.values()):
            raise BadInput("--base-url targets a running server: drop --profile and the profile overrides")
        return external_profile(target.base_url, target.model)
    if target.model:
        raise BadInput("--model names the model of a running server: use it with --base-url")
    from launchers.profiles import resolve_profile

    return resolve_profile(target.profile or DEFAULT_PROFILE, overrides, target.profiles_file)


def with_capture(profile: Profile, capture: bool) -> Profile:
    """A launched server must be started with --enable-return-indexer-topk to return selections."""
    if not capture or not launched(profile):
        return profile
    if profile.pd:
        raise BadInput(
            f"--capture-indexer: profile {profile.name!r} is PD-disaggregated; its decode server never computes "
            "the prompt positions, so their indexer rows are not its own. Use a single-server profile"
        )
    return profile.model_copy(update={"enable_return_indexer_topk": True})


def run_place(spec: RunSpec, out: str | Path | None) -> tuple[Path, str]:
    """Where a new run goes (--out: a folder for runs, or a run id; default: the runs home) and its id;
    BadInput, before anything starts, for an --out that is itself a run or compare directory."""
    root, run_id = runs_home(), new_run_id(spec)
    if out:
        text = str(out)
        if isinstance(out, Path) or "/" in text or Path(text).is_dir():
            root = Path(out)
            if (root / RUN_FILE).is_file() or (root / COMPARE_FILE).is_file():  # a run would nest in it
                what = "a run" if (root / RUN_FILE).is_file() else "a compare"
                fix = f"resume it with `recall-eval sweep --resume {text}`, or " if what == "a run" else ""
                raise BadInput(
                    f"--out {text} is {what} directory, not a folder for runs; {fix}give the folder new "
                    f"runs go in (e.g. {root.parent})"
                )
        elif _RUN_ID.fullmatch(text):
            run_id = text
        else:
            raise BadInput(f"--out {text!r}: give a directory (runs are created inside it) or a run id")
    return root, run_id


def _new_store(
    spec: RunSpec, profile: Profile, place: tuple[Path, str], scoring: str = "lenient"
) -> RunStore:
    root, run_id = place
    run = Run(
        run_id=run_id,
        spec=spec,
        profile=profile,
        versions=run_versions(spec),
        created_at=time.time(),
        cases_planned=planned_cases(spec),
        scoring=check_scoring(scoring),
    )
    return RunStore.create(run, root)


def check_lengths_of(spec: RunSpec) -> None:
    """BadInput for a length no suite of the spec can render (tiktoken estimate; no server needed)."""
    shortest = min(spec.lengths)
    recipes = [
        recipe
        for suite in spec.suites
        for recipe in suites.build_recipes(suite, (shortest,), spec.depths, 1, spec.seed)
        if not getattr(recipe, "fixed", False)  # a prepared file's rows are not sized to --lengths
    ]
    check_lengths_servable(spec.lengths, recipes)


def check_target(profile: Profile, request: RequestOptions, on_cluster: bool = False) -> None:
    """An external server must answer; a profile to launch must pass the preflight (engine importable
    by the server's Python, GPUs, ports, model path: launchers/preflight.py), one line per failure.
    on_cluster: it will run on a cluster's node, whose actor runs the preflight there; here only its
    argv is built (a setting its engine does not have is BadInput)."""
    if not launched(profile):
        check_reachable(profile, request)
        return
    if on_cluster:
        from launchers.kinds import build_command

        build_command(profile)
        return
    from launchers.preflight import require_preflight

    require_preflight(profile)


def handle_leftovers(store: RunStore, stop: bool, hooks: Hooks) -> None:
    """A server this run started that outlived its harness (servers.json) holds its GPUs and port:
    stopped when asked, else reported with the way to stop it (UserError)."""
    from recall_eval.api.reading import leftover_servers, stop_leftover_server

    for leftover in leftover_servers(store.path):
        if not stop:
            raise UserError(
                f"{leftover.describe()} from an earlier harness of this run; add --stop-leftovers to stop it "
                f"(or: kill -TERM -- -{leftover.record.pid})"
            )
        hooks.note(f"stopping {leftover.describe()}")
        if not stop_leftover_server(leftover):
            raise UserError(
                f"could not stop {leftover.describe()}; stop it by hand (kill -KILL -- -{leftover.record.pid})"
            )


def execute(
    store: RunStore,
    profile: Profile,
    hooks: Hooks,
    request: RequestOptions | None = None,
    render: bool = True,
    retry: frozenset[str] = frozenset(),
    gate: RecallGate | None = None,
    executor: Executor | None = None,
) -> RunRecord:
    """Run a stored run's pending cases against `profile` (launched on `executor`, default this
    machine), then render its report."""
    run_recorded(store, profile, hooks, request, retry=retry, executor=executor)
    return finished_record(store, hooks, render, gate)


def finished_record(
    store: RunStore, hooks: Hooks, render: bool = True, gate: RecallGate | None = None
) -> RunRecord:
    """A run that has just finished: its report rendered (when asked), its verdict (exit code and the
    lines of an unmet --fail-under), the caller told."""
    if render:
        import reports

        reports.render_report(store.path)
    record = RunRecord.from_store(store)
    record = dataclasses.replace(record, verdict=verdict(record.results, gate, scoring=store.run.scoring))
    hooks.run_done(record)
    return record


def sweep(options: SweepOptions | None = None, /, *, hooks: Hooks | None = None, **fields: Any) -> RunRecord:
    """Run the recall grid (suites x lengths x depths x trials) against a server; returns the stored run.

    Give a SweepOptions, flat keywords (`sweep(lengths="338..4096", trials=1, base_url=...)`), or both
    (keywords win). Unset options take the defaults in recall_eval.api.options. With `base_url` the
    running server is used; otherwise the profile's server (default: the embedded reference engine) is
    launched for the sweep and stopped after it. Raises BadInput for bad options (nothing is created),
    UserError when the server cannot be reached, RunStopped when the run ends early (run.json says
    why; `resume` finishes it), RunInterrupted on Ctrl-C.
    """
    options = updated(options or SweepOptions(), **fields)
    hooks = hooks or Hooks()
    ci = options.ci
    baseline = read_baseline(ci.baseline) if ci.baseline is not None else None
    tolerance = parse_tolerance(ci.tolerance)
    if tolerance is not None and baseline is None:
        raise BadInput("--tolerance is the drop a --baseline gate accepts: add --baseline FILE")
    if baseline is not None:
        options = with_baseline_defaults(options, baseline)
    spec = build_spec(options.grid, options.request, options.variant, options.capture_indexer)
    gate = recall_gate(options.fail_under, spec.suites)
    scoring = check_scoring(options.scoring)
    if baseline is not None and ci.baseline is not None:
        check_baseline(ci.baseline, baseline, spec, scoring)
    if ci.fail_fast and baseline is None and gate is None:
        raise BadInput("--fail-fast stops a gate early: add --baseline FILE or --fail-under RECALL")
    check_lengths_of(spec)
    profile = with_capture(build_profile(options.target), options.capture_indexer)
    place = run_place(spec, options.out)
    cluster = options.cluster
    # before a run directory exists: nothing to resume
    check_target(profile, options.request, on_cluster=bool(cluster.ray))
    store = _new_store(spec, profile, place, scoring)
    hooks.note(f"run {store.run.run_id} -> {store.path}")
    if (settings := settings_text(spec)) is not None:
        hooks.note(settings)
    write_config(store.path, options)  # the effective configuration, as a run file (secrets left out)
    from recall_eval.api.ci_gate import gated_run, wants_ci_files

    if baseline is not None or ci.fail_fast or wants_ci_files(ci):
        return gated_run(store, profile, hooks, options, gate, baseline, tolerance)
    from launchers.executors import open_executor

    with open_executor(cluster.ray if launched(profile) else None, cluster.ray_node_gpus) as executor:
        return execute(
            store, profile, hooks, options.request, render=options.render_report, gate=gate, executor=executor
        )


def resume_options(options: SweepOptions, again: ResumeOptions | None = None) -> ResumeOptions:
    """The part of sweep options a resume takes, with what only a resume takes (`again`: retry,
    stop_leftovers); BadInput naming the options it does not take."""
    refused = [flag_of(options.grid, name) for name in given(options.grid)]
    refused += [
        flag_of(options.target, name) for name in given(options.target) if name not in ("base_url", "port")
    ]
    refused += ["--variant"] * (options.variant is not None) + ["--out"] * (options.out is not None)
    refused += ["--capture-indexer"] * options.capture_indexer
    refused += ["--scoring (re-render with `recall-eval report RUN --scoring ...`)"] * (
        options.scoring is not None
    )
    refused += _kept_settings(options.request)
    refused += [flag_of(options.ci, name) for name in given(options.ci)]  # a gate starts a new run
    if refused:
        raise BadInput(f"--resume reuses the run's own spec and profile: drop {', '.join(refused)}")
    return dataclasses.replace(
        again or ResumeOptions(),
        request=options.request,
        base_url=options.target.base_url,
        port=options.target.port,
        render_report=options.render_report,
        fail_under=options.fail_under,
    )


def _kept_settings(request: RequestOptions) -> list[str]:
    """The flags given for request settings that change verdicts: a resume keeps the run's own."""
    keep = RequestSettings().settings(verdicts=True)
    return [flag_of(request, name) for name in given(request) if name in keep]


def _reopen(run_dir: Path, options: ResumeOptions) -> tuple[RunStore, Profile]:
    kept = _kept_settings(options.request)
    if kept:
        raise BadInput(f"--resume keeps the run's own request settings: drop {', '.join(kept)}")
    store = RunStore.open(run_dir)
    owner = store.run.owner
    if (
        store.run.status == "running"
        and owner is not None
        and owner.pid != os.getpid()
        and owner_alive(owner)
    ):
        raise UserError(
            f"--resume {run_dir}: the run is still running (pid {owner.pid}); wait for it, or stop it "
            f"(Ctrl-C there, or kill -INT {owner.pid}) and resume then"
        )
    profile = store.run.profile
    if profile is None:
        raise UserError(f"{run_dir}/run.json has no profile; it cannot be resumed")
    changed = changed_prompts(store)
    if changed:
        raise BadInput(
            f"--resume {run_dir}: the suites changed since this run started ({changed}); its cases would mix "
            "old and new prompts. Start a new sweep"
        )
    rescored = changed_scoring(store)
    if rescored:
        raise BadInput(
            f"--resume {run_dir}: {rescored.replace(' RUN', f' {run_dir}')}; re-score it first, so that its "
            "old and new cases are judged alike"
        )
    if options.base_url:
        replicas = external_profile(options.base_url, profile.served_model_name)
        profile = profile.model_copy(
            update={
                "engine": "external",
                "base_url": replicas.base_url,
                "replica_base_urls": replicas.replica_base_urls,
            }
        )
    elif options.port is not None:  # the port does not change results: a busy one may be swapped
        profile = profile.model_copy(update={"port": options.port})
    changes = {  # how requests are sent may change (concurrency, timeout, retries: no verdict changes)
        name: getattr(options.request, name)
        for name in RequestSettings().settings(verdicts=False)
        if getattr(options.request, name) is not None
    }
    run = store.run.model_copy(
        update={"spec": store.run.spec.model_copy(update=changes), "status": "running", "note": None}
    )
    store.write_run(run)
    return store, profile


def resume(
    run_dir: Path | str, options: ResumeOptions | None = None, /, *, hooks: Hooks | None = None, **fields: Any
) -> RunRecord:
    """Finish an interrupted or failed run: reload its results, run the cases not yet stored, with the
    run's own spec and profile. Options may change how requests are sent and where (base_url, port)."""
    options = updated(options or ResumeOptions(), **fields)
    hooks = hooks or Hooks()
    check_request(options.request)
    retry = parse_retry(_spec_text(options.retry)) if options.retry else frozenset()
    store = RunStore.open(Path(run_dir))
    gate = recall_gate(options.fail_under, store.run.spec.suites)
    if store.run.status == "finished" and not retry:  # every case ran: nothing to send, no server
        hooks.note(f"run {store.run.run_id} already finished: nothing to resume, report rendered again")
        return finished_record(store, hooks, options.render_report, gate)
    handle_leftovers(store, options.stop_leftovers, hooks)
    store, profile = _reopen(store.path, options)
    auth = request_auth(options.request)
    if store.run.spec.api_key_used and not auth.api_key:
        hooks.note(
            "this run sent an API key, which is never stored: give it again (--api-key or "
            "RECALL_EVAL_API_KEY) if the server asks for one",
            level="warning",
        )
    check_target(profile, options.request)
    return execute(
        store, profile, hooks, options.request, render=options.render_report, retry=retry, gate=gate
    )
