"""How a stored run ended, written into run.json (finished, interrupted, failed with the reason), and
what the library raises for it: RunInterrupted after Ctrl-C, RunStopped for an early end (an external
server that went away mid-run leaves the run interrupted, not failed)."""

from __future__ import annotations

import time
from typing import NoReturn

from recall_eval.api.records import RunInterrupted, RunStopped
from recall_eval.errors import BadInput, UserError
from recall_eval.run_owner import this_process
from recall_eval.runner import ServerGone, SweepStopped
from recall_eval.store import RunStore
from recall_eval.types import RunStatus


def claim_run(store: RunStore) -> None:
    """Record this process as the run's owner (run.json `owner`): if it dies without a word, `runs`
    shows the run as interrupted instead of running."""
    owner = this_process()
    store.update_run(lambda run: run.model_copy(update={"owner": owner}))


def finish_run(store: RunStore, status: RunStatus, note: str | None = None) -> None:
    store.update_run(
        lambda run: run.model_copy(update={"status": status, "finished_at": time.time(), "note": note})
    )


def recorded_stop(store: RunStore, err: BaseException) -> BaseException:
    """Record in run.json how the run ended after `err`; returns what to raise: RunInterrupted after
    Ctrl-C, RunStopped for a stopped sweep or a UserError (secrets masked), else `err` itself."""
    label = store.run.spec.variant
    if isinstance(err, KeyboardInterrupt):
        finish_run(store, "interrupted", "stopped by Ctrl-C")
        return RunInterrupted(store.path, label)
    if isinstance(err, ServerGone):  # the server went away, the run did not fail: resume finishes it
        finish_run(store, "interrupted", str(err))
        return RunStopped(UserError(store.redactor.text(str(err))), store.path, label, gave_up=True)
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
