"""A tiny guard process per server start: when the harness dies, it stops the server's process group.

    python -m launchers.watchdog HARNESS_PID PGID GRACE_S

Why a process and not PR_SET_PDEATHSIG alone: the parent-death signal follows the *thread* that forked
the server (a relaunch runs on a worker thread that may end long before the harness), and it reaches
only the group leader, not the workers an engine forks. The guard runs in its own session (a signal to
the harness's terminal group does not reach it), polls its parent pid, and once the harness is gone
sends SIGTERM to the whole group, then SIGKILL after GRACE_S. It exits by itself as soon as the group
is empty (the harness stopped the server normally). It imports only the standard library: it starts
in a few tens of milliseconds.
"""

from __future__ import annotations

import os
import signal
import sys
import time

POLL_S = 0.2


def group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def stop_group(pgid: int, grace_s: float) -> None:
    """SIGTERM the group, wait up to grace_s for it to empty, then SIGKILL what is left."""
    try:
        os.killpg(pgid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + grace_s
    while group_alive(pgid) and time.monotonic() < deadline:
        time.sleep(0.05)
    try:
        os.killpg(pgid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def guard(harness_pid: int, pgid: int, grace_s: float) -> None:
    while group_alive(pgid):
        if os.getppid() != harness_pid:  # re-parented: the harness died, however it died
            stop_group(pgid, grace_s)
            return
        time.sleep(POLL_S)


def main() -> None:
    harness_pid, pgid, grace_s = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
    for signum in (signal.SIGINT, signal.SIGHUP, signal.SIGTERM):
        signal.signal(signum, signal.SIG_IGN)  # only the harness's death ends the guard early
    guard(harness_pid, pgid, grace_s)


if __name__ == "__main__":
    main()
