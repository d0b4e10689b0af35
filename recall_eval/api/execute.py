"""Running one stored run: reach (or launch) the target, probe it, calibrate the pending cases, run
them, and keep run.json current however the run ends."""

from __future__ import annotations

import asyncio
import dataclasses
import platform
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

import httpx

import suites
from recall_eval.api.hooks import Hooks
from recall_eval.api.options import RequestOptions
from recall_eval.api.records import RunInterrupted, RunStopped
from recall_eval.calibration import DEFAULT_TOKENS_PER_WORD, CalibrationCache, Calibrator, recipe_id
from recall_eval.client import ChatClient
from recall_eval.errors import UserError
from recall_eval.indexer_client import IndexerCapture, open_capture
from recall_eval.reuse import key_mismatch
from recall_eval.runner import Runner, RunnerHooks, RunnerSettings, SweepStopped
from recall_eval.server_probe import probe_server
from recall_eval.store import RunStore
from recall_eval.tokenization import probe_tokenizer
from recall_eval.types import Case, CaseRecipe, Endpoint, Profile, RunSpec, RunStatus, ServerHandle


def package_version() -> str:
    try:
        return metadata.version("recall-eval")
    except metadata.PackageNotFoundError:
        return "0+unknown"


def versions(server_version: str | None = None) -> dict[str, str]:
    found = {"recall-eval": package_version(), "python": platform.python_version()}
    if server_version:
        found["server"] = server_version
    return found


def run_versions(spec: RunSpec) -> dict[str, str]:
    """What a new run records in run.json's versions: the package, Python, and the reuse key of its grid
    (suite versions and the rendered prompts' digest; see recall_eval.reuse)."""
    key = suites.reuse_key(package_version(), spec.suites, spec.lengths, spec.depths, spec.trials, spec.seed)
    return {**versions(), **key}


def reuse_key_of(spec: RunSpec) -> dict[str, str]:
    """The entries of run_versions that a reused run must share (not Python's version)."""
    return {name: value for name, value in run_versions(spec).items() if name != "python"}


def changed_prompts(store: RunStore) -> str | None:
    """Why a stored run's cases would not be the ones the suites render now (None: they are). Only the
    suite versions and the prompts' digest count here (a package upgrade alone may finish a run); a run
    that predates the digest cannot be checked."""
    stored = store.run.versions
    if "prompts" not in stored:
        return None
    key = {name: value for name, value in reuse_key_of(store.run.spec).items() if name != "recall-eval"}
    return key_mismatch(stored, key)


def finish_run(store: RunStore, status: RunStatus, note: str | None = None) -> None:
    store.write_run(store.run.model_copy(update={"status": status, "finished_at": time.time(), "note": note}))


@dataclass
class Target:
    """Where requests go: a launched server (with a handle) or an external one."""

    base_url: str
    model: str | None
    handle: ServerHandle | None = None
    time_to_ready_s: float | None = None
    server_info: dict[str, Any] = field(default_factory=dict)


@contextmanager
def open_target(profile: Profile, log_dir: Path, hooks: Hooks) -> Iterator[Target]:
    """Launch the profile's server (stopped on exit, also on errors and Ctrl-C), or use an external one."""
    if profile.engine == "external":
        assert profile.base_url is not None
        yield Target(base_url=profile.base_url, model=profile.served_model_name)
        return
    from launchers.lifecycle import launch, sigterm_raises_exit

    with sigterm_raises_exit():
        with hooks.launching(profile):
            # the runner owns the relaunch retries; one attempt per relaunch here
            server = launch(profile, log_dir, echo=hooks.server_output, relaunch_attempts=1)
        with server:  # the launcher has said, through hooks.server_output, that it is ready
            yield Target(
                base_url=server.endpoint.base_url,
                model=server.endpoint.model,
                handle=server,
                time_to_ready_s=server.time_to_ready_s,
                server_info=dict(server.server_info or {}),
            )


def run_recorded(
    store: RunStore,
    profile: Profile,
    hooks: Hooks,
    request: RequestOptions | None = None,
    retry: frozenset[str] = frozenset(),
) -> None:
    """Launch or reach the target, run the pending cases, and record how the run ended in run.json,
    whatever happens. Raises RunInterrupted after Ctrl-C and RunStopped when the run ended early."""
    label = store.run.spec.variant
    try:
        with open_target(profile, store.path, hooks) as target:
            asyncio.run(run_sweep(store, target, hooks, request or RequestOptions(), retry))
    except KeyboardInterrupt:
        finish_run(store, "interrupted", "stopped by Ctrl-C")
        raise RunInterrupted(store.path, label) from None
    except SweepStopped as err:
        finish_run(store, "failed", str(err))
        raise RunStopped(UserError(str(err)), store.path, label, gave_up=True) from err
    except UserError as err:
        finish_run(store, "failed", str(err))
        raise RunStopped(err, store.path, label, gave_up=False) from err
    except Exception as err:
        finish_run(store, "failed", f"{type(err).__name__}: {err}")
        raise
    finish_run(store, "finished")


def build_recipes(spec: RunSpec) -> list[CaseRecipe]:
    return [
        recipe
        for suite in spec.suites
        for recipe in suites.build_recipes(suite, spec.lengths, spec.depths, spec.trials, spec.seed)
    ]


def http_client(request: RequestOptions | None = None) -> httpx.AsyncClient:
    """The HTTP client of every request to the target (probe, tokenize, chat). `request` carries the
    request options that are not stored in the RunSpec (what must not be written to run.json goes here)."""
    # No read timeout here: each request's whole duration is bounded by the client's request timeout.
    return httpx.AsyncClient(
        timeout=httpx.Timeout(None, connect=10.0), limits=httpx.Limits(max_connections=256)
    )


def check_reachable(profile: Profile, request: RequestOptions | None = None) -> None:
    """Fail before running anything when an external server cannot be reached (or lacks the model)."""

    async def probe() -> None:
        async with http_client(request) as http:
            await probe_server(profile.base_url or "", http, profile.served_model_name)

    asyncio.run(probe())


async def run_sweep(
    store: RunStore,
    target: Target,
    hooks: Hooks,
    request: RequestOptions,
    retry: frozenset[str] = frozenset(),
) -> None:
    """Probe, calibrate the cases not yet final, and run them; results land in the store as they finish.
    retry: outcomes whose stored cases are not final (they run again; their earlier lines stay)."""
    spec = store.run.spec
    async with http_client(request) as http:
        facts = await probe_server(target.base_url, http, target.model)
        server_info = {**target.server_info, **facts.server_info, "base_url": target.base_url}
        store.write_run(
            store.run.model_copy(
                update={
                    "server_info": server_info,
                    "time_to_ready_s": target.time_to_ready_s,
                    "versions": {**store.run.versions, **versions(facts.version)},
                }
            )
        )
        endpoint = Endpoint(base_url=target.base_url, model=facts.model)
        tokenizer = await probe_tokenizer(endpoint, http)
        if not tokenizer.exact:
            hooks.note(
                f"{target.base_url} has no /v1/tokenize; lengths are measured with {tokenizer.name} "
                "and an approximate chat template, so they are approximate for this model",
                level="warning",
            )
        client = ChatClient(endpoint, http, request_timeout_s=spec.request_timeout_s)
        if spec.capture_indexer and not tokenizer.exact:
            raise UserError(
                f"--capture-indexer needs the server's /v1/tokenize (needle offsets in its tokens); "
                f"{target.base_url} has none"
            )
        capture = await _open_capture(store, client, server_info) if spec.capture_indexer else None
        recipes = build_recipes(spec)
        done = store.final_case_ids(retry=retry)
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
            calibrated = await Calibrator(tokenizer, cache).calibrate(
                fits, only=to_calibrate, on_done=progress.calibrated
            )
            cache.save(store.path)
            progress.log(
                f"calibrated {len(calibrated)} cases with {tokenizer.name} in {time.perf_counter() - started:.1f}s"
            )
            cases = _in_recipe_order(recipes, calibrated, done)
            settings = RunnerSettings(
                variant=spec.variant,
                max_tokens=spec.max_tokens,
                concurrency=spec.concurrency,
                context_limit=limit,
                retry=retry,
            )
            hooks = RunnerHooks(on_start=progress.started, on_result=progress.finished, on_event=progress.log)
            progress.start_run()
            runner = Runner(store, client, settings, handle=target.handle, hooks=hooks, capture=capture)
            await runner.run(cases)


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
    store.write_run(store.run.model_copy(update={"server_info": {**store.run.server_info, **layout}}))
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
