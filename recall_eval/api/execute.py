"""Running one stored run: reach (or launch) the target, probe it, calibrate the pending cases, run
them, and keep run.json current however the run ends. Where the target is lives in api.targets, how a
run's end is recorded in api.run_status, what a run records as its versions in api.versions."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import suites
from recall_eval import adaptations as adapted
from recall_eval import event_loop
from recall_eval.adaptations import Adaptations
from recall_eval.api.hooks import Hooks, SweepProgress
from recall_eval.api.options import RequestOptions
from recall_eval.api.run_status import claim_run, finish_run, raise_recorded
from recall_eval.api.targets import Target, open_target, probe_wait_s, request_auth, target_urls
from recall_eval.api.versions import versions
from recall_eval.calibration import (
    DEFAULT_TOKENS_PER_WORD,
    OFF_TARGET,
    CalibrationCache,
    Calibrator,
    UntrustedCounts,
    recipe_id,
)
from recall_eval.chat_client import ChatClient
from recall_eval.connect import connect
from recall_eval.engines import launched
from recall_eval.errors import UserError
from recall_eval.http_client import RunClient, make_http_client
from recall_eval.indexer_capture import IndexerCapture, open_capture
from recall_eval.redact import Redactor
from recall_eval.runner import Runner, RunnerHooks, RunnerSettings
from recall_eval.server_probe import PROBE_WAIT_S
from recall_eval.server_url import api_root, server_root, without_userinfo
from recall_eval.store import RunStore
from recall_eval.thinking import THINKING_MAX_TOKENS
from recall_eval.tokenization import (
    SERVER_TOKENIZER_NAME,
    CountingFailed,
    TiktokenTokenizer,
    TokenCounter,
    answer_counter,
)
from recall_eval.transport import ServerAuth
from recall_eval.types import Case, CaseRecipe, Profile, RunSpec


def run_recorded(
    store: RunStore,
    profile: Profile,
    hooks: Hooks,
    request: RequestOptions | None = None,
    retry: frozenset[str] = frozenset(),
) -> None:
    """Launch or reach the target, run the pending cases, and record how the run ended in run.json,
    whatever happens. Raises RunInterrupted after Ctrl-C and RunStopped when the run ended early.

    The key and headers of `request` (see request_auth) go on every request; a launched profile that
    starts its server with --api-key supplies its own. Secrets are masked in everything the store
    writes and in the error raised."""
    auth = request_auth(request)
    store.redactor = Redactor(auth.secrets())
    claim_run(store)
    if profile.fault is not None:  # said before anything starts, and kept in run.json's profile
        hooks.note(
            f"planted fault {profile.fault} is on: this server is broken on purpose (a gate's own test)",
            level="warning",
        )
    try:
        with open_target(profile, store.path, hooks) as target:
            launched_key = getattr(target.handle, "api_key", None)
            if launched_key and not auth.api_key:
                auth = ServerAuth(api_key=launched_key, headers=auth.headers, verify=auth.verify)
                store.redactor = Redactor(auth.secrets())
            event_loop.run(run_sweep(store, target, hooks, auth, retry, probe_wait_s(request)))
    except (KeyboardInterrupt, Exception) as err:
        raise_recorded(store, err)
    finish_run(store, "finished")


def build_recipes(spec: RunSpec) -> list[CaseRecipe]:
    return [
        recipe
        for suite in spec.suites
        for recipe in suites.build_recipes(suite, spec.lengths, spec.depths, spec.trials, spec.seed)
    ]


def planned_cases(spec: RunSpec) -> int:
    """The cases a spec asks for: its recipes, counted (a file suite has as many as its rows, whatever
    the grid); run.json's cases_planned."""
    return len(build_recipes(spec))


async def run_sweep(
    store: RunStore,
    target: Target,
    hooks: Hooks,
    auth: ServerAuth | None = None,
    retry: frozenset[str] = frozenset(),
    probe_wait: float = PROBE_WAIT_S,
) -> None:
    """Probe every replica, calibrate the cases not yet final, and run them; results land in the
    store as they finish. retry: outcomes whose stored cases are not final (they run again; their
    earlier lines stay). probe_wait: how long /v1/models may take to answer (--probe-timeout)."""
    async with (
        make_http_client(auth) as http,
        prepared_sweep(store, target, hooks, http, retry, probe_wait=probe_wait) as sweep,
    ):
        sweep.progress.start_run()
        await sweep.runner.run(sweep.cases)


@dataclass
class PreparedSweep:
    """A run ready to send its pending cases: the runner, the cases, the progress shown."""

    runner: Runner
    cases: list[Case]
    progress: SweepProgress


@asynccontextmanager
async def prepared_sweep(
    store: RunStore,
    target: Target,
    hooks: Hooks,
    http: RunClient,
    retry: frozenset[str] = frozenset(),
    interleaved: bool = False,
    probe_wait: float = PROBE_WAIT_S,
) -> AsyncIterator[PreparedSweep]:
    """Probe every replica, write what the server said into run.json, calibrate the pending cases
    against this run's own server, and hold the progress display while the caller runs them.

    run.json's `interleaved` stays true only while every case of the run is sent interleaved with
    another variant's: a run that sends cases alone (a sweep, a resume, a compare that could not
    interleave) is marked false."""
    spec = store.run.spec
    profile = store.run.profile
    urls = target_urls(profile, target.base_url) if profile is not None else [server_root(target.base_url)]
    shown_url = without_userinfo(urls[0])
    adaptations = run_adaptations(store, hooks)
    given = (profile.base_url if profile is not None and not launched(profile) else None) or ""
    if given and given.rstrip("/") != urls[0]:
        adapted_line = (
            f"--base-url {without_userinfo(given)}: requests go to {without_userinfo(api_root(urls[0]))}/..."
        )
        adaptations.note(adapted.BASE_URL, adapted_line)
    if getattr(http, "insecure", False):  # http_client.RunClient
        adaptations.note(adapted.TLS, "--insecure: the server's TLS certificate was not checked")
    hint = (
        "the server this run launched stopped answering; see its server-*.log in the run directory"
        if target.handle is not None
        else None
    )
    connection = await connect(
        urls,
        http,
        spec,
        target.model,
        adaptations=adaptations,
        probe_wait_s=probe_wait,
        **({"hint": hint} if hint else {}),
    )
    for line in connection.warnings:
        adaptations.note(adapted.MODELS_ENDPOINT, line)
    if connection.tokenizer_notes:
        adaptations.note(
            adapted.LENGTHS,
            f"{'; '.join(connection.tokenizer_notes)}: lengths are estimated instead (tiktoken)"
            if connection.lengths_estimated
            else f"{'; '.join(connection.tokenizer_notes)}: lengths measured with {connection.tokenizer.name}",
        )
    facts, tokenizer, client = connection.facts, connection.tokenizer, connection.client
    server_info = {
        **target.server_info,
        **connection.server_info,
        "base_url": shown_url,
        "api_root": api_root(shown_url),
    }
    recipes = build_recipes(spec)
    done = store.final_case_ids(retry=retry)
    pending = {recipe_id(recipe) for recipe in recipes} - done
    # a run with cases sent alone earlier stays not interleaved; one with nothing to send keeps its flag
    interleaved = (interleaved and (store.run.interleaved or not done)) if pending else store.run.interleaved
    store.update_run(
        lambda run: run.model_copy(
            update={
                "server_info": server_info,
                "time_to_ready_s": target.time_to_ready_s,
                "versions": {**run.versions, **versions(facts.version)},
                "length_measure": tokenizer.name,
                "estimated_length_suites": spec.suites if connection.lengths_estimated else (),
                "interleaved": interleaved,
                "cases_planned": len(recipes),
            }
        )
    )
    if connection.lengths_estimated and not connection.tokenizer_notes:
        hooks.note(
            f"{shown_url} offers no tokenizer endpoint and no usage counts; lengths are estimated "
            f"with {tokenizer.name} and an approximate chat template (the report says so)",
            level="warning",
        )
    if spec.capture_indexer and tokenizer.name != SERVER_TOKENIZER_NAME:
        raise UserError(
            f"--capture-indexer needs the server's /v1/tokenize (needle offsets in its tokens); "
            f"{shown_url} has none"
        )
    capture = await _open_capture(store, client, server_info) if spec.capture_indexer else None
    limit = facts.context_length
    fits = [recipe for recipe in recipes if limit is None or recipe.target_tokens < limit]
    to_calibrate = {recipe_id(recipe) for recipe in fits} - done
    cache = CalibrationCache.load(store.path)
    already = [
        result for result in store.results() if result.case_id in {recipe_id(r) for r in recipes} & done
    ]
    with hooks.sweep_progress(
        total=len(recipes),
        already_done=len(already),
        already_passed=sum(r.outcome == "pass" for r in already),
    ) as progress:
        progress.start_calibration(len(to_calibrate))
        started = time.perf_counter()
        try:
            calibrated = await Calibrator(tokenizer, cache).calibrate(
                fits, only=to_calibrate, on_done=progress.calibrated
            )
        except (UntrustedCounts, CountingFailed) as untrusted:
            why = (
                f"the server's token counts do not follow the prompt ({untrusted})"
                if isinstance(untrusted, UntrustedCounts)
                else f"the server stopped answering length measurements ({untrusted})"
            )
            tokenizer = _estimated_lengths(store, adaptations, why)
            progress.start_calibration(len(to_calibrate))
            calibrated = await Calibrator(tokenizer, cache).calibrate(
                fits, only=to_calibrate, on_done=progress.calibrated
            )
        cache.save(store.path)
        off = [case for case in calibrated if case.params.get(OFF_TARGET)]
        if off:
            hooks.note(
                f"{len(off)} case{'' if len(off) == 1 else 's'} could not reach the target length within "
                f"tolerance and {'is' if len(off) == 1 else 'are'} sent at the nearest length, flagged off "
                f"target (the others keep exact lengths); e.g. {off[0].suite} at {off[0].target_tokens}: "
                f"{off[0].params[OFF_TARGET]}",
                level="warning",
            )
        refused = sum(case.too_long is not None for case in calibrated)
        if refused:
            adaptations.note(
                adapted.TOO_LONG,
                f"the server refused {refused} prompt(s) as longer than its context while their lengths "
                "were measured; those cases are too_long, not sent",
            )
        progress.log(
            f"calibrated {len(calibrated)} case{'' if len(calibrated) == 1 else 's'} with {tokenizer.name} in {time.perf_counter() - started:.1f}s"
        )
        settings = RunnerSettings(
            variant=spec.variant,
            max_tokens=spec.max_tokens,
            case_budgets=spec.case_budgets,
            concurrency=spec.concurrency,
            context_limit=limit,
            retry=retry,
            thinking_max_tokens=None if spec.max_tokens_given else THINKING_MAX_TOKENS,
            thinking_learned=adapted.THINKING_BUDGET in adaptations,  # a resume keeps the raised budget
        )
        redact = store.redactor.text
        runner_hooks = RunnerHooks(
            on_start=progress.started,
            on_result=progress.finished,
            on_event=lambda line: progress.log(redact(line)),
            on_adapted=adaptations.note,
        )
        runner = Runner(
            store,
            client,
            settings,
            handle=target.handle,
            hooks=runner_hooks,
            capture=capture,
            replicas=connection.replicas,
            answer_counter=answer_counter(tokenizer),
        )
        yield PreparedSweep(runner, _in_recipe_order(recipes, calibrated, done), progress)


def run_adaptations(store: RunStore, hooks: Hooks) -> Adaptations:
    """The run's adaptations, continuing what run.json holds: each new one is said once on the console
    (a warning line) and written into run.json at once."""

    def on_new(name: str, line: str) -> None:
        hooks.note(store.redactor.text(line), level="warning")
        store.update_run(lambda run: run.model_copy(update={"adaptations": {**run.adaptations, name: line}}))

    return Adaptations(store.run.adaptations, on_new)


def _estimated_lengths(store: RunStore, adaptations: Adaptations, why: str) -> TokenCounter:
    """Switch the run to estimated lengths (tiktoken) after the server's counts failed a check or the
    server stopped answering measurements (`why`: what it did)."""
    tokenizer = TiktokenTokenizer()
    spec = store.run.spec
    adaptations.note(adapted.LENGTHS, f"{why}; lengths are estimated with {tokenizer.name} instead")
    store.update_run(
        lambda run: run.model_copy(
            update={"length_measure": tokenizer.name, "estimated_length_suites": spec.suites}
        )
    )
    return tokenizer


async def _open_capture(store: RunStore, client: ChatClient, server_info: dict[str, Any]) -> IndexerCapture:
    """Probe /generate with return_indexer_topk and record the indexer layout in run.json."""
    profile = store.run.profile
    capture = await open_capture(
        client,
        server_info,
        profile_topk=profile.index_topk if profile is not None else None,
        model_path=profile.model_path if profile is not None else None,
    )
    layout = {"indexer_layout": dataclasses.asdict(capture.layout)}
    store.update_run(lambda run: run.model_copy(update={"server_info": {**run.server_info, **layout}}))
    return capture


def _in_recipe_order(recipes: list[CaseRecipe], calibrated: list[Case], done: set[str]) -> list[Case]:
    """Every pending case in grid order; recipes beyond the context stay uncalibrated (never sent)."""
    by_id = {case.id: case for case in calibrated}
    cases = []
    for recipe in recipes:
        case_id = recipe_id(recipe)
        if case_id in done:
            continue
        case = by_id.get(case_id)
        cases.append(case if case is not None else recipe.render(recipe.words_guess(DEFAULT_TOKENS_PER_WORD)))
    return cases
