"""Variants on running servers at once: their requests interleaved, each run recorded as it ends.

A compare whose variants are all running servers (--base-url) prepares every run first (probe,
calibration against the run's own server), then runs them together, their requests taking turns case
by case (recall_eval.turns: A1 B1 A2 B2 ...), so machine drift hits every variant alike and the
compare report may test their speeds as pairs. Each run keeps its own directory, results appended as
cases finish, and resume.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from contextlib import AsyncExitStack, ExitStack

from recall_eval import event_loop
from recall_eval.api.execute import PreparedSweep, build_recipes, prepared_sweep
from recall_eval.api.hooks import Hooks
from recall_eval.api.options import RequestOptions
from recall_eval.api.records import RunRecord
from recall_eval.api.run_status import claim_run, finish_run, raise_recorded, recorded_stop
from recall_eval.api.sweeping import finished_record
from recall_eval.api.targets import Target, open_target, probe_wait_s, request_auth
from recall_eval.calibration import recipe_id
from recall_eval.http_client import make_http_client
from recall_eval.redact import Redactor
from recall_eval.runner import first_leaf
from recall_eval.store import RunStore
from recall_eval.transport import ServerAuth
from recall_eval.turns import Turns
from recall_eval.types import Profile


def execute_interleaved(
    stores: Sequence[RunStore],
    profiles: Sequence[Profile],
    hooks: Hooks,
    request: RequestOptions | None = None,
) -> list[RunRecord]:
    """Run stored runs at once against their running servers, then render each run's report."""
    run_interleaved_recorded(stores, profiles, hooks, request)
    return [finished_record(store, hooks) for store in stores]


class _LaneFailed(Exception):
    """One run of an interleaved execution failed (the others were cancelled with it)."""

    def __init__(self, lane: int, error: Exception):
        super().__init__(str(error))
        self.lane = lane
        self.error = error


def run_interleaved_recorded(
    stores: Sequence[RunStore],
    profiles: Sequence[Profile],
    hooks: Hooks,
    request: RequestOptions | None = None,
) -> None:
    """Run several stored runs against running servers at once, their requests taking turns case by
    case (recall_eval.turns: A1 B1 A2 B2 ...), and record in each run.json how it ended, as
    run_recorded does. When one run fails, the others stop with it (interrupted, saying why) and its
    RunStopped is raised; after Ctrl-C every run is interrupted and RunInterrupted names the first."""
    auth = request_auth(request)
    for store in stores:
        store.redactor = Redactor(auth.secrets())
        claim_run(store)
    labels = [store.run.spec.variant for store in stores]
    try:
        with hooks.interleaving(labels), ExitStack() as stack:
            targets = [
                stack.enter_context(open_target(p, s.path, hooks))
                for s, p in zip(stores, profiles, strict=True)
            ]
            event_loop.run(_run_sweeps_interleaved(stores, targets, hooks, auth, probe_wait_s(request)))
    except _LaneFailed as failed:
        for lane, store in enumerate(stores):
            if lane != failed.lane:
                finish_run(store, "interrupted", f"stopped with variant {labels[failed.lane]}, which failed")
        raise_recorded(stores[failed.lane], failed.error)
    except (KeyboardInterrupt, Exception) as err:
        for store in stores[1:]:
            recorded_stop(store, err)
        raise_recorded(stores[0], err)
    for store in stores:
        finish_run(store, "finished")


async def _run_sweeps_interleaved(
    stores: Sequence[RunStore], targets: Sequence[Target], hooks: Hooks, auth: ServerAuth, probe_wait: float
) -> None:
    """Prepare every run (probe, calibrate against its own server), then run them all at once."""
    turns = Turns(len(stores), [recipe_id(recipe) for recipe in build_recipes(stores[0].run.spec)])
    async with AsyncExitStack() as stack:
        sweeps = []
        for lane, (store, target) in enumerate(zip(stores, targets, strict=True)):
            try:
                http = await stack.enter_async_context(make_http_client(auth))
                sweep = prepared_sweep(store, target, hooks, http, interleaved=True, probe_wait=probe_wait)
                sweeps.append(await stack.enter_async_context(sweep))
            except Exception as err:
                raise _LaneFailed(lane, err) from err
        for lane, sweep in enumerate(sweeps):
            sweep.runner.turns = turns.lane(lane)
            sweep.progress.start_run()

        async def run_lane(lane: int, sweep: PreparedSweep) -> None:
            try:
                await sweep.runner.run(sweep.cases)
            except Exception as err:
                raise _LaneFailed(lane, err) from err

        try:
            async with asyncio.TaskGroup() as group:
                for lane, sweep in enumerate(sweeps):
                    group.create_task(run_lane(lane, sweep))
        except BaseExceptionGroup as group:
            raise first_leaf(group) from None
