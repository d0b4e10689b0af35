"""Did the kernel's OOM killer fire? Read from our cgroup's counter (v2 memory.events, v1 memory.oom_control).

Children are in our cgroup, so a counter that grew while a server ran, together with that server's
death by SIGKILL, says the kernel killed it for memory. Best effort: None where the counter is unreadable.
"""

from __future__ import annotations

from pathlib import Path

CGROUP_ROOT = Path("/sys/fs/cgroup")


def _candidates(proc_cgroup: str) -> list[Path]:
    paths = []
    for line in proc_cgroup.splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        _, controllers, path = parts
        relative = path.lstrip("/")
        if controllers == "":  # cgroup v2 unified hierarchy
            paths += [CGROUP_ROOT / relative / "memory.events", CGROUP_ROOT / "memory.events"]
        elif "memory" in controllers.split(","):  # cgroup v1 memory controller
            paths += [
                CGROUP_ROOT / "memory" / relative / "memory.oom_control",
                CGROUP_ROOT / "memory" / "memory.oom_control",
            ]
    return paths


def oom_kill_count() -> int | None:
    """The oom_kill counter of this process's memory cgroup, or None if it cannot be read."""
    try:
        proc_cgroup = Path("/proc/self/cgroup").read_text()
    except OSError:
        return None
    for path in _candidates(proc_cgroup):
        try:
            text = path.read_text()
        except OSError:
            continue
        for line in text.splitlines():
            key, _, value = line.partition(" ")
            if key == "oom_kill" and value.strip().isdigit():
                return int(value)
    return None
