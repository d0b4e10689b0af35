"""Which process is running a run, so that a run whose harness was killed (SIGKILL, a lost machine)
is not shown as `running` for ever.

run.json's `owner` records the pid, the process's start time (a pid is reused; pid and start time
together name one process) and the host. A run stored as running whose owner is gone is shown as
`interrupted (no process)`; one owned on another host, or stored before owners were recorded, is shown
as stored (nothing here can tell).
"""

from __future__ import annotations

import os
import socket

import psutil

from recall_eval.types import Run, RunOwner

GONE = "interrupted (no process)"


def this_process() -> RunOwner:
    """The owner record of the calling process."""
    return RunOwner(pid=os.getpid(), started_at=psutil.Process().create_time(), host=socket.gethostname())


def owner_alive(owner: RunOwner) -> bool | None:
    """True while the owning process runs; False once it is gone (or its pid now names another
    process); None when it ran on another host."""
    if owner.host != socket.gethostname():
        return None
    try:
        process = psutil.Process(owner.pid)
        return (
            abs(process.create_time() - owner.started_at) < 1.0 and process.status() != psutil.STATUS_ZOMBIE
        )
    except psutil.Error:
        return False


def shown_status(run: Run) -> str:
    """The run's status as it is now: `interrupted (no process)` for a run stored as running whose
    owner is gone; else the stored status."""
    if run.status == "running" and run.owner is not None and owner_alive(run.owner) is False:
        return GONE
    return run.status
