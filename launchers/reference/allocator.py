"""glibc malloc settings for the server process: keep freed tensor memory instead of giving it back.

By default glibc serves every allocation over its mmap threshold (at most 32 MiB) with a fresh mmap and
unmaps it on free, so each prefill faults in and zeroes its activations anew: a 22,597-token prefill
took ~600,000 minor page faults and ~1.6 s of system time (about a quarter of its CPU) on the 2-core
machine. With one arena (every thread allocates from the main heap), no mmap for large blocks, a high trim
threshold and 256 MiB of slack per heap extension, the heap keeps its pages between requests and a
second prefill faults none (tests/launchers/reference/test_allocator.py):
the same tokens out, ~25-30% less CPU (tests/benchmarks/bench_reference_cpu.py). The heap stays at its
peak size between requests (the peak itself is unchanged); RLIMIT_DATA (--memory-limit-gb) still caps
it, since brk is data memory.
"""

from __future__ import annotations

import ctypes
import ctypes.util

# mallopt parameters (glibc malloc.h)
_M_TRIM_THRESHOLD = -1
_M_TOP_PAD = -2
_M_MMAP_MAX = -4
_M_ARENA_MAX = -8
TRIM_THRESHOLD_BYTES = 1 << 30  # free memory at the heap's top kept up to this much
# each heap extension takes this much more: a 64-byte-aligned tensor asks for a little more than the
# block freed before it, and without slack every such request extended the heap (and faulted) again
TOP_PAD_BYTES = 256 << 20


def keep_freed_memory() -> bool:
    """Apply the settings to this process (before large allocations); False where libc has no mallopt
    (not glibc) or refuses one, and the process keeps the default allocator behaviour."""
    name = ctypes.util.find_library("c")
    if name is None:
        return False
    try:
        mallopt = ctypes.CDLL(name).mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes, mallopt.restype = (ctypes.c_int, ctypes.c_int), ctypes.c_int
    settings = (
        (_M_ARENA_MAX, 1),
        (_M_MMAP_MAX, 0),
        (_M_TRIM_THRESHOLD, TRIM_THRESHOLD_BYTES),
        (_M_TOP_PAD, TOP_PAD_BYTES),
    )
    return all(mallopt(parameter, value) == 1 for parameter, value in settings)
