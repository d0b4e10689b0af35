"""A stored run made ready to send its pending cases, one job per function: probe the target's
replicas (and note what the run adapts to), record what the server said in run.json, find what is
still to run, calibrate it to the server's tokenizer, build the runner. run.json is written off the
event loop throughout (RunWrites)."""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import suites
from recall_eval import adaptations as adapted
from recall_eval.adaptations import Adaptations
from recall_eval.api.hooks import Hooks, SweepProgress
from recall_eval.api.targets import Target, target_urls
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
from recall_eval.connect import ProbedTarget, connect
from recall_eval.engines import launched
from recall_eval.errors import UserError
from recall_eval.http_client import RunClient
from recall_eval.indexer_capture import IndexerCapture, open_capture
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
from recall_eval.types import Case, CaseRecipe, Result, Run, RunSpec


def build_recipes(spec: RunSpec) -> list[CaseRecipe]:
    """The run's recipes in the order their cases are sent: suite by suite, and within a suite trial
    by trial, each trial in grid order (shorter lengths first, then depth).

    A suite's cases of one (seed, trial) share their filler stream, so a case's prompt starts as the
    prompts of that trial's other cases do up to the earlier of their needles: a server's prefix cache
    (SGLang's radix cache, the reference engine's) prefills only the rest. Sent trial by trial, the
    cache holds one stream at a time; in the suites' (length, depth, trial) order the trials alternate,
    and at 22,597 tokens two streams outgrow the reference engine's 32,768-token pool, so each evicts the
    other (the default sweep prefilled 350K of its 497K prompt tokens that way, 310K trial by trial:
    tests/benchmarks/bench_send_order.py)."""
    ordered: list[CaseRecipe] = []
    for suite in spec.suites:
        recipes = suites.build_recipes(suite, spec.lengths, spec.depths, spec.trials, spec.seed)
        ordered += sorted(recipes, key=lambda recipe: recipe.trial)  # stable: grid order within a trial
    return ordered


def planned_cases(spec: RunSpec) -> int:
    """The cases a spec asks for: its recipes, counted (a file suite has as many as its rows, whatever
    the grid); run.json's cases_planned."""
    return len(build_recipes(spec))


@dataclass
class PreparedSweep:
    """A run ready to send its pending cases: the runner, the cases, the progress shown."""

    runner: Runner
    cases: list[Case]
    progress: SweepProgress


class RunWrites:
    """run.json changes made while the event loop runs, written off it (a worker thread: the write, its
    fsync and the directory's), so the timings of requests in flight stay true. The store's lock keeps
    changes from overwriting each other; flush() waits for every one handed over."""

    def __init__(self, store: RunStore):
        self.store = store
        self.pending: list[asyncio.Future[Run]] = []

    def soon(self, change: Callable[[Run], Run]) -> None:
        """Hand the change to a worker thread (from a callback on the loop, which cannot await)."""
        self.pending.append(asyncio.get_running_loop().run_in_executor(None, self.store.update_run, change))

    async def now(self, change: Callable[[Run], Run]) -> Run:
        return await asyncio.to_thread(self.store.update_run, change)

    async def flush(self) -> None:
        pending, self.pending = self.pending, []
        await asyncio.gather(*pending)


@dataclass
class Reached:
    """The run's server as probed: the connection (client, tokenizer, facts), what it said about itself,
    and the run's adaptations so far."""

    connection: ProbedTarget
    adaptations: Adaptations
    shown_url: str  # the first replica's URL without credentials
    server_info: dict[str, Any]


@dataclass(frozen=True)
class Pending:
    """What of the grid is still to run: the case ids already final, those to calibrate and send, and
    the stored results of the final ones (shown as already done)."""

    done: set[str]
    ids: set[str]
    already: list[Result]

    @classmethod
    def of(cls, store: RunStore, recipes: list[CaseRecipe], retry: frozenset[str]) -> Pending:
        """One read of results.jsonl and one pass over the recipes (linear in the cases, also when most
        of a large grid is already done)."""
        grid = {recipe_id(recipe) for recipe in recipes}
        latest = store.results()
        done = {result.case_id for result in latest if result.outcome not in retry}
        already = [result for result in latest if result.case_id in done and result.case_id in grid]
        return cls(done, grid - done, already)


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
    writes = RunWrites(store)
    try:
        reached = await _reach(store, target, hooks, http, writes, probe_wait)
        spec, connection = store.run.spec, reached.connection
        recipes = build_recipes(spec)
        pending = Pending.of(store, recipes, retry)
        # a run with cases sent alone earlier stays not interleaved; one with nothing to send keeps its flag
        was = store.run.interleaved
        interleaved = (interleaved and (was or not pending.done)) if pending.ids else was
        await writes.now(_server_facts(reached, target, len(recipes), interleaved))
        if connection.lengths_estimated and not connection.tokenizer_notes:
            hooks.note(
                f"{reached.shown_url} offers no tokenizer endpoint and no usage counts; lengths are estimated "
                f"with {connection.tokenizer.name} and an approximate chat template (the report says so)",
                level="warning",
            )
        if spec.capture_indexer and connection.tokenizer.name != SERVER_TOKENIZER_NAME:
            raise UserError(
                f"--capture-indexer needs the server's /v1/tokenize (needle offsets in its tokens); "
                f"{reached.shown_url} has none"
            )
        capture = (
            await _open_capture(store, connection.client, reached.server_info, writes)
            if spec.capture_indexer
            else None
        )
        with hooks.sweep_progress(
            total=len(recipes),
            already_done=len(pending.already),
            already_passed=sum(r.outcome == "pass" for r in pending.already),
        ) as progress:
            calibrated, tokenizer = await _calibrate(
                store, reached, recipes, pending, progress, hooks, writes
            )
            runner = _runner(store, reached, target, progress, capture, retry, tokenizer)
            yield PreparedSweep(runner, _in_recipe_order(recipes, calibrated, pending.done), progress)
    finally:
        await writes.flush()


async def _reach(
    store: RunStore, target: Target, hooks: Hooks, http: RunClient, writes: RunWrites, probe_wait: float
) -> Reached:
    """Probe every replica of the target; what the run adapts to on the way is noted (and written)."""
    profile = store.run.profile
    urls = target_urls(profile, target.base_url) if profile is not None else [server_root(target.base_url)]
    shown_url = without_userinfo(urls[0])
    adaptations = run_adaptations(store, hooks, writes)
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
        store.run.spec,
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
    server_info = {
        **target.server_info,
        **connection.server_info,
        "base_url": shown_url,
        "api_root": api_root(shown_url),
    }
    return Reached(connection, adaptations, shown_url, server_info)


def _server_facts(reached: Reached, target: Target, planned: int, interleaved: bool) -> Callable[[Run], Run]:
    """The change to run.json that records what the server said and how lengths are measured."""
    connection = reached.connection

    def change(run: Run) -> Run:
        return run.model_copy(
            update={
                "server_info": reached.server_info,
                "time_to_ready_s": target.time_to_ready_s,
                "versions": {**run.versions, **versions(connection.facts.version)},
                "length_measure": connection.tokenizer.name,
                "estimated_length_suites": run.spec.suites if connection.lengths_estimated else (),
                "interleaved": interleaved,
                "cases_planned": planned,
            }
        )

    return change


async def _calibrate(
    store: RunStore,
    reached: Reached,
    recipes: list[CaseRecipe],
    pending: Pending,
    progress: SweepProgress,
    hooks: Hooks,
    writes: RunWrites,
) -> tuple[list[Case], TokenCounter]:
    """The pending cases that fit the server's context, calibrated to their lengths with the server's
    tokenizer (estimated instead when its counts fail a check or it stops answering them)."""
    limit = reached.connection.facts.context_length
    fits = [recipe for recipe in recipes if limit is None or recipe.target_tokens < limit]
    to_calibrate = {recipe_id(recipe) for recipe in fits} & pending.ids
    cache = await asyncio.to_thread(CalibrationCache.load, store.path)
    tokenizer = reached.connection.tokenizer
    progress.start_calibration(len(to_calibrate))
    started = time.perf_counter()
    try:
        calibrated = await Calibrator(tokenizer, cache, keep_prompts=False).calibrate(
            fits, only=to_calibrate, on_done=progress.calibrated
        )
    except (UntrustedCounts, CountingFailed) as untrusted:
        why = (
            f"the server's token counts do not follow the prompt ({untrusted})"
            if isinstance(untrusted, UntrustedCounts)
            else f"the server stopped answering length measurements ({untrusted})"
        )
        tokenizer = await _estimated_lengths(store, reached.adaptations, why, writes)
        progress.start_calibration(len(to_calibrate))
        calibrated = await Calibrator(tokenizer, cache, keep_prompts=False).calibrate(
            fits, only=to_calibrate, on_done=progress.calibrated
        )
    await asyncio.to_thread(cache.save, store.path)
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
        reached.adaptations.note(
            adapted.TOO_LONG,
            f"the server refused {refused} prompt(s) as longer than its context while their lengths "
            "were measured; those cases are too_long, not sent",
        )
    progress.log(
        f"calibrated {len(calibrated)} case{'' if len(calibrated) == 1 else 's'} with {tokenizer.name} in "
        f"{time.perf_counter() - started:.1f}s"
    )
    return calibrated, tokenizer


def _runner(
    store: RunStore,
    reached: Reached,
    target: Target,
    progress: SweepProgress,
    capture: IndexerCapture | None,
    retry: frozenset[str],
    tokenizer: TokenCounter,
) -> Runner:
    """The runner of the run's cases: its settings from the spec, its events to the progress display."""
    spec = store.run.spec
    settings = RunnerSettings(
        variant=spec.variant,
        max_tokens=spec.max_tokens,
        case_budgets=spec.case_budgets,
        concurrency=spec.concurrency,
        context_limit=reached.connection.facts.context_length,
        retry=retry,
        thinking_max_tokens=None if spec.max_tokens_given else THINKING_MAX_TOKENS,
        thinking_learned=adapted.THINKING_BUDGET in reached.adaptations,  # a resume keeps the raised budget
    )
    redact = store.redactor.text
    runner_hooks = RunnerHooks(
        on_start=progress.started,
        on_result=progress.finished,
        on_event=lambda line: progress.log(redact(line)),
        on_adapted=reached.adaptations.note,
    )
    return Runner(
        store,
        reached.connection.client,
        settings,
        handle=target.handle,
        hooks=runner_hooks,
        capture=capture,
        replicas=reached.connection.replicas,
        answer_counter=answer_counter(tokenizer),
    )


def run_adaptations(store: RunStore, hooks: Hooks, writes: RunWrites | None = None) -> Adaptations:
    """The run's adaptations, continuing what run.json holds: each new one is said once on the console
    (a warning line) and written into run.json (off the event loop when `writes` is given)."""

    def on_new(name: str, line: str) -> None:
        hooks.note(store.redactor.text(line), level="warning")

        def change(run: Run) -> Run:
            return run.model_copy(update={"adaptations": {**run.adaptations, name: line}})

        if writes is not None:
            writes.soon(change)
        else:
            store.update_run(change)

    return Adaptations(store.run.adaptations, on_new)


async def _estimated_lengths(
    store: RunStore, adaptations: Adaptations, why: str, writes: RunWrites
) -> TokenCounter:
    """Switch the run to estimated lengths (tiktoken) after the server's counts failed a check or the
    server stopped answering measurements (`why`: what it did)."""
    tokenizer = TiktokenTokenizer()
    spec = store.run.spec
    adaptations.note(adapted.LENGTHS, f"{why}; lengths are estimated with {tokenizer.name} instead")
    await writes.now(
        lambda run: run.model_copy(
            update={"length_measure": tokenizer.name, "estimated_length_suites": spec.suites}
        )
    )
    return tokenizer


async def _open_capture(
    store: RunStore, client: ChatClient, server_info: dict[str, Any], writes: RunWrites
) -> IndexerCapture:
    """Probe /generate with return_indexer_topk and record the indexer layout in run.json."""
    profile = store.run.profile
    capture = await open_capture(
        client,
        server_info,
        profile_topk=profile.index_topk if profile is not None else None,
        model_path=profile.model_path if profile is not None else None,
    )
    layout = {"indexer_layout": dataclasses.asdict(capture.layout)}
    await writes.now(lambda run: run.model_copy(update={"server_info": {**run.server_info, **layout}}))
    return capture


def _in_recipe_order(recipes: list[CaseRecipe], calibrated: list[Case], done: set[str]) -> list[Case]:
    """Every pending case in send order (build_recipes); recipes beyond the context stay uncalibrated
    (never sent)."""
    by_id = {case.id: case for case in calibrated}
    cases = []
    for recipe in recipes:
        case_id = recipe_id(recipe)
        if case_id in done:
            continue
        case = by_id.get(case_id)
        cases.append(case if case is not None else recipe.render(recipe.words_guess(DEFAULT_TOKENS_PER_WORD)))
    return cases
