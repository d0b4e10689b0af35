"""A real cap on the server process's memory, so that allocations beyond it fail in the allocator.

RLIMIT_DATA bounds the process's private writable memory (heap and anonymous mmaps, which is
where torch's CPU allocator gets tensors), not its mapped shared libraries. An allocation over
the cap makes malloc/mmap fail with ENOMEM and torch raise a clean RuntimeError
("DefaultCPUAllocator: can't allocate memory ..."), which the engine turns into
EngineOutOfMemory. RLIMIT_AS would also work but counts torch's large library and thread-arena
reservations, so the same number would mean much less usable memory.
"""

from __future__ import annotations

import resource
from pathlib import Path

GIB = 2**30


def data_segment_bytes(status_path: Path = Path("/proc/self/status")) -> int:
    """Private writable memory of this process now (VmData): what RLIMIT_DATA is compared against."""
    for line in status_path.read_text().splitlines():
        if line.startswith("VmData:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"no VmData line in {status_path}")


def cap_data_memory(limit_bytes: int) -> int:
    """Set RLIMIT_DATA (soft and hard) to limit_bytes; returns the usage at the time of the call.

    Raises ValueError when the cap is below what the process already uses (a cap it could never honour).
    """
    in_use = data_segment_bytes()
    if limit_bytes <= in_use:
        raise ValueError(
            f"--memory-limit-gb {limit_bytes / GIB:.3f} is below the {in_use / GIB:.3f} GiB the server "
            f"process already uses before loading the model; raise the limit"
        )
    resource.setrlimit(resource.RLIMIT_DATA, (limit_bytes, limit_bytes))
    return in_use


def is_allocation_failure(exc: BaseException) -> bool:
    """True for the errors a failed allocation surfaces as (torch's CPU allocator, malloc, numpy)."""
    if isinstance(exc, MemoryError):
        return True
    text = str(exc)
    return isinstance(exc, RuntimeError) and (
        "can't allocate memory" in text or "Cannot allocate memory" in text or "out of memory" in text
    )
