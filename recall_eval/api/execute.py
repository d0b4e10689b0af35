"""Running one stored run: reach (or launch) the target, probe it, calibrate the pending cases, run
them, and keep run.json current however the run ends."""

from __future__ import annotations

import dataclasses
import platform
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any, NoReturn

import httpx

import suites
from recall_eval import adaptations as adapted
from recall_eval import event_loop
from recall_eval.adaptations import Adaptations
from recall_eval.api.hooks import Hooks, SweepProgress
from recall_eval.api.options import RequestOptions
from recall_eval.api.records import RunInterrupted, RunStopped
from recall_eval.calibration import (
    DEFAULT_TOKENS_PER_WORD,
    CalibrationCache,
    Calibrator,
    UntrustedCounts,
    recipe_id,
)
from recall_eval.client import ChatClient
from recall_eval.connect import THINKING_MAX_TOKENS, auth_of, connect, probe_replicas
from recall_eval.errors import BadInput, UserError
from recall_eval.indexer_client import IndexerCapture, open_capture
from recall_eval.redact import Redactor
from recall_eval.reuse import key_mismatch
from recall_eval.run_client import make_http_client
from recall_eval.runner import Runner, RunnerHooks, RunnerSettings, SweepStopped
from recall_eval.server_url import api_root, server_root, without_userinfo
from recall_eval.store import RunStore
from recall_eval.tokenization import SERVER_TOKENIZER_NAME, TiktokenTokenizer, TokenCounter
from recall_eval.transport import ServerAuth, tls_verify
from recall_eval.types import Case, CaseRecipe, Profile, RunSpec, RunStatus, ServerHandle


def package_version() -> str:
    try:
        return metadata.version("recall-eval")
    except metadata.PackageNotFoundError:
        return "0+unknown"


# what a run records about the machine that measured it, but that a reused run need not share
NOT_IN_REUSE_KEY = ("python", "event_loop")


def versions(server_version: str | None = None) -> dict[str, str]:
    found = {
        "recall-eval": package_version(),
        "python": platform.python_version(),
        "event_loop": event_loop.loop_name(),  # the client-side timings were taken on it
    }
    if server_version:
        found["server"] = server_version
    return found


def run_versions(spec: RunSpec) -> dict[str, str]:
    """What a new run records in run.json's versions: the package, Python, and the reuse key of its grid
    (suite versions and the rendered prompts' digest; see recall_eval.reuse)."""
    key = suites.reuse_key(package_version(), spec.suites, spec.lengths, spec.depths, spec.trials, spec.seed)
    return {**versions(), **key}


def reuse_key_of(spec: RunSpec) -> dict[str, str]:
    """The entries of run_versions that a reused run must share (not Python's version, nor the loop)."""
    return {name: value for name, value in run_versions(spec).items() if name not in NOT_IN_REUSE_KEY}


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
        yield Target(base_url=server_root(profile.base_url), model=profile.served_model_name)
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


def request_auth(request: RequestOptions | None) -> ServerAuth:
    """The key (--api-key, else $RECALL_EVAL_API_KEY, else $OPENAI_API_KEY) and headers of the request
    options: used on every request, never stored."""
    request = request or RequestOptions()
    auth = auth_of(request.api_key, list(request.headers or ()))
    try:
        verify = tls_verify(request.ca_bundle, bool(request.insecure))
    except ValueError as err:
        raise BadInput(f"--ca-bundle: {err}") from None
    return dataclasses.replace(auth, verify=verify)


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
    try:
        with open_target(profile, store.path, hooks) as target:
            launched_key = getattr(target.handle, "api_key", None)
            if launched_key and not auth.api_key:
                auth = ServerAuth(api_key=launched_key, headers=auth.headers, verify=auth.verify)
                store.redactor = Redactor(auth.secrets())
            event_loop.run(run_sweep(store, target, hooks, auth, retry))
    except (KeyboardInterrupt, Exception) as err:
        raise_recorded(store, err)
    finish_run(store, "finished")


def recorded_stop(store: RunStore, err: BaseException) -> BaseException:
    """Record in run.json how the run ended after `err`; returns what to raise: RunInterrupted after
    Ctrl-C, RunStopped for a stopped sweep or a UserError (secrets masked), else `err` itself."""
    label = store.run.spec.variant
    if isinstance(err, KeyboardInterrupt):
        finish_run(store, "interrupted", "stopped by Ctrl-C")
        return RunInterrupted(store.path, label)
    if isinstance(err, SweepStopped):
        finish_run(store, "failed", str(err))
        return RunStopped(UserError(store.redactor.text(str(err))), store.path, label, gave_up=True)
    if isinstance(err, UserError):
        finish_run(store, "failed", str(err))
        masked = store.redactor.text(str(err))
        if masked != str(err):
            err = BadInput(masked) if isinstance(err, BadInput) else UserError(masked, err.exit_code)
        return RunStopped(err, store.path, label, gave_up=False)
    finish_run(store, "failed", f"{type(err).__name__}: {err}")
    return err


def raise_recorded(store: RunStore, err: BaseException) -> NoReturn:
    stop = recorded_stop(store, err)
    if stop is err:
        raise err
    raise stop from (None if isinstance(err, KeyboardInterrupt) else err)


def build_recipes(spec: RunSpec) -> list[CaseRecipe]:
    return [
        recipe
        for suite in spec.suites
        for recipe in suites.build_recipes(suite, spec.lengths, spec.depths, spec.trials, spec.seed)
    ]


def http_client(auth: ServerAuth | None = None) -> httpx.AsyncClient:
    """The run's HTTP client (recall_eval.transport): auth headers on every request, connect timeout;
    the stream reader and the retry helper own the other limits."""
    return make_http_client(auth)


def target_urls(profile: Profile, base_url: str) -> list[str]:
    """Every endpoint serving the variant: the target's URL, then an external profile's replicas, each
    as its server root (recall_eval.server_url: a trailing /v1 or slash dropped)."""
    urls = [base_url, *profile.replica_base_urls] if profile.engine == "external" else [base_url]
    return [server_root(url) for url in urls]


def check_reachable(profile: Profile, request: RequestOptions | None = None) -> None:
    """Fail before running anything when an external server (any replica) cannot be reached, lacks
    the model, or refuses the key."""

    async def probe() -> None:
        async with http_client(request_auth(request)) as http:
            urls = target_urls(profile, profile.base_url or "")
            await probe_replicas(urls, http, profile.served_model_name)

    event_loop.run(probe())


async def run_sweep(
    store: RunStore,
    target: Target,
    hooks: Hooks,
    auth: ServerAuth | None = None,
    retry: frozenset[str] = frozenset(),
) -> None:
    """Probe every replica, calibrate the cases not yet final, and run them; results land in the
    store as they finish. retry: outcomes whose stored cases are not final (they run again; their
    earlier lines stay)."""
    async with http_client(auth) as http, prepared_sweep(store, target, hooks, http, retry) as sweep:
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
    http: httpx.AsyncClient,
    retry: frozenset[str] = frozenset(),
    interleaved: bool = False,
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
    given = (profile.base_url if profile is not None and profile.engine == "external" else None) or ""
    if given and given.rstrip("/") != urls[0]:
        adapted_line = f"--base-url {without_userinfo(given)}: requests go to {without_userinfo(api_root(urls[0]))}/..."
        adaptations.note(adapted.BASE_URL, adapted_line)
    if getattr(http, "insecure", False):  # run_client.RunClient
        adaptations.note(adapted.TLS, "--insecure: the server's TLS certificate was not checked")
    hint = (
        "the server this run launched stopped answering; see its server-*.log in the run directory"
        if target.handle is not None
        else None
    )
    connection = await connect(
        urls, http, spec, target.model, adaptations=adaptations, **({"hint": hint} if hint else {})
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
    store.write_run(
        store.run.model_copy(
            update={
                "server_info": server_info,
                "time_to_ready_s": target.time_to_ready_s,
                "versions": {**store.run.versions, **versions(facts.version)},
                "length_measure": tokenizer.name,
                "estimated_length_suites": spec.suites if connection.lengths_estimated else (),
                "interleaved": interleaved,
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
        except UntrustedCounts as untrusted:
            tokenizer = _estimated_lengths(store, adaptations, str(untrusted))
            progress.start_calibration(len(to_calibrate))
            calibrated = await Calibrator(tokenizer, cache).calibrate(
                fits, only=to_calibrate, on_done=progress.calibrated
            )
        cache.save(store.path)
        refused = sum(case.too_long is not None for case in calibrated)
        if refused:
            adaptations.note(
                adapted.TOO_LONG,
                f"the server refused {refused} prompt(s) as longer than its context while their lengths "
                "were measured; those cases are too_long, not sent",
            )
        progress.log(
            f"calibrated {len(calibrated)} cases with {tokenizer.name} in {time.perf_counter() - started:.1f}s"
        )
        settings = RunnerSettings(
            variant=spec.variant,
            max_tokens=spec.max_tokens,
            concurrency=spec.concurrency,
            context_limit=limit,
            retry=retry,
            thinking_max_tokens=None if spec.max_tokens_given else THINKING_MAX_TOKENS,
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
        )
        yield PreparedSweep(runner, _in_recipe_order(recipes, calibrated, done), progress)


def run_adaptations(store: RunStore, hooks: Hooks) -> Adaptations:
    """The run's adaptations, continuing what run.json holds: each new one is said once on the console
    (a warning line) and written into run.json at once."""

    def on_new(name: str, line: str) -> None:
        hooks.note(store.redactor.text(line), level="warning")
        store.write_run(
            store.run.model_copy(update={"adaptations": {**store.run.adaptations, name: line}})
        )

    return Adaptations(store.run.adaptations, on_new)


def _estimated_lengths(store: RunStore, adaptations: Adaptations, why: str) -> TokenCounter:
    """Switch the run to estimated lengths (tiktoken) after the server's counts failed a check."""
    tokenizer = TiktokenTokenizer()
    spec = store.run.spec
    adaptations.note(
        adapted.LENGTHS,
        f"the server's token counts do not follow the prompt ({why}); lengths are estimated with "
        f"{tokenizer.name} instead",
    )
    store.write_run(
        store.run.model_copy(
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
