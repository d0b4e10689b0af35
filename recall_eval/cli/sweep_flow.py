"""The body of `recall-eval sweep`: reach the target, calibrate the grid, run it, keep run.json current."""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import typer
from rich.console import Console
from rich.text import Text

import suites
from recall_eval.calibration import DEFAULT_TOKENS_PER_WORD, CalibrationCache, Calibrator, recipe_id
from recall_eval.cli.common import finish_run, versions
from recall_eval.cli.progress import SweepProgress
from recall_eval.client import ChatClient
from recall_eval.errors import BadInput, UserError
from recall_eval.indexer_client import IndexerCapture, open_capture
from recall_eval.runner import Runner, RunnerHooks, RunnerSettings, SweepStopped
from recall_eval.server_probe import probe_server
from recall_eval.store import RunStore
from recall_eval.tokenization import probe_tokenizer
from recall_eval.types import Case, CaseRecipe, Endpoint, Profile, RunSpec, ServerHandle


@dataclass
class Target:
    """Where requests go: a launched server (with a handle) or an external one."""

    base_url: str
    model: str | None
    handle: ServerHandle | None = None
    time_to_ready_s: float | None = None
    server_info: dict[str, Any] = field(default_factory=dict)


@contextmanager
def open_target(profile: Profile, log_dir: Path, console: Console) -> Iterator[Target]:
    """Launch the profile's server (stopped on exit, also on errors and Ctrl-C), or use an external one."""
    if profile.engine == "external":
        assert profile.base_url is not None
        yield Target(base_url=profile.base_url, model=profile.served_model_name)
        return
    from launchers.lifecycle import launch, sigterm_raises_exit

    def echo(line: str) -> None:
        console.print(Text(line, style="dim"), highlight=False)  # log text is not markup

    with sigterm_raises_exit():
        with console.status(f"starting the {profile.name} server ({profile.engine})..."):
            # the runner owns the relaunch retries; one attempt per relaunch here
            server = launch(profile, log_dir, echo=echo, relaunch_attempts=1)
        with server:
            console.print(
                f"server {profile.name} ready at {server.endpoint.base_url} in {server.time_to_ready_s:.1f}s"
            )
            yield Target(
                base_url=server.endpoint.base_url,
                model=server.endpoint.model,
                handle=server,
                time_to_ready_s=server.time_to_ready_s,
                server_info=dict(server.server_info or {}),
            )


@dataclass(frozen=True)
class StopMessages:
    """What to tell the user when a run stops early; `sweep` and `compare` word the way back apart."""

    interrupted: str  # after Ctrl-C (rich markup)
    stopped: Callable[[SweepStopped], str]  # the runner gave up (server died, too many errors)
    failed: Callable[[UserError], str]  # bad state or input met on the way


def run_recorded(store: RunStore, profile: Profile, console: Console, messages: StopMessages) -> None:
    """Launch or reach the target, run the pending cases, and record how the run ended in run.json,
    whatever happens (Ctrl-C included)."""
    try:
        with open_target(profile, store.path, console) as target:
            asyncio.run(run_sweep(store, target, console))
    except KeyboardInterrupt:
        finish_run(store, "interrupted", "stopped by Ctrl-C")
        console.print(messages.interrupted, highlight=False)
        raise typer.Exit(130) from None
    except SweepStopped as err:
        finish_run(store, "failed", str(err))
        raise UserError(messages.stopped(err)) from err
    except UserError as err:
        finish_run(store, "failed", str(err))
        if isinstance(err, BadInput):
            raise BadInput(messages.failed(err)) from err
        raise UserError(messages.failed(err), err.exit_code) from err
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


def http_client() -> httpx.AsyncClient:
    # No read timeout here: each request's whole duration is bounded by the client's request timeout.
    return httpx.AsyncClient(
        timeout=httpx.Timeout(None, connect=10.0), limits=httpx.Limits(max_connections=256)
    )


def check_reachable(profile: Profile) -> None:
    """Fail before running anything when an external server cannot be reached (or lacks the model)."""

    async def probe() -> None:
        async with http_client() as http:
            await probe_server(profile.base_url or "", http, profile.served_model_name)

    asyncio.run(probe())


async def run_sweep(store: RunStore, target: Target, console: Console) -> None:
    """Probe, calibrate the cases not yet final, and run them; results land in the store as they finish."""
    spec = store.run.spec
    async with http_client() as http:
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
            console.print(
                f"[yellow]note:[/yellow] {target.base_url} has no /v1/tokenize; lengths are measured with "
                f"{tokenizer.name} and an approximate chat template, so they are approximate for this model"
            )
        client = ChatClient(endpoint, http, request_timeout_s=spec.request_timeout_s)
        if spec.capture_indexer and not tokenizer.exact:
            raise UserError(
                f"--capture-indexer needs the server's /v1/tokenize (needle offsets in its tokens); "
                f"{target.base_url} has none"
            )
        capture = await _open_capture(store, client, server_info) if spec.capture_indexer else None
        recipes = build_recipes(spec)
        done = store.final_case_ids()
        limit = facts.context_length
        fits = [recipe for recipe in recipes if limit is None or recipe.target_tokens < limit]
        to_calibrate = {recipe_id(recipe) for recipe in fits} - done
        cache = CalibrationCache.load(store.path)
        already = [result for result in store.results() if result.case_id in {recipe_id(r) for r in recipes}]
        with SweepProgress(
            console,
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
