"""Running one stored run: reach (or launch) the target, run its pending cases, and keep run.json
current however the run ends. Where the target is lives in api.targets, how the pending cases are
prepared (probe, calibration, runner) in api.preparing, how a run's end is recorded in api.run_status."""

from __future__ import annotations

from typing import TYPE_CHECKING

from recall_eval import event_loop
from recall_eval.api.hooks import Hooks
from recall_eval.api.options import RequestOptions
from recall_eval.api.preparing import build_recipes, planned_cases, prepared_sweep
from recall_eval.api.run_status import claim_run, finish_run, raise_recorded
from recall_eval.api.targets import Target, open_target, probe_wait_s, request_auth
from recall_eval.http_client import make_http_client
from recall_eval.redact import Redactor
from recall_eval.server_probe import PROBE_WAIT_S
from recall_eval.store import RunStore
from recall_eval.transport import ServerAuth
from recall_eval.types import Profile

if TYPE_CHECKING:
    from launchers.executors import Executor

__all__ = ["build_recipes", "planned_cases", "run_recorded", "run_sweep"]


def run_recorded(
    store: RunStore,
    profile: Profile,
    hooks: Hooks,
    request: RequestOptions | None = None,
    retry: frozenset[str] = frozenset(),
    executor: Executor | None = None,
) -> None:
    """Launch (on `executor`: this machine by default) or reach the target, run the pending cases, and record how the run ended in run.json,
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
        with open_target(profile, store.path, hooks, executor=executor) as target:
            launched_key = getattr(target.handle, "api_key", None)
            if launched_key and not auth.api_key:
                auth = ServerAuth(api_key=launched_key, headers=auth.headers, verify=auth.verify)
                store.redactor = Redactor(auth.secrets())
            event_loop.run(run_sweep(store, target, hooks, auth, retry, probe_wait_s(request)))
    except (KeyboardInterrupt, Exception) as err:
        raise_recorded(store, err)
    finish_run(store, "finished")


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
