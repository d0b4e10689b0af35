"""The server's malloc settings (launchers/reference/allocator.py): a second prefill reuses the first
one's freed memory instead of faulting its pages in again, in a thread other than the main one (as the
server runs the engine). Without the settings the same prefill faults its activations in anew."""

from __future__ import annotations

import subprocess
import sys

from tests.e2e.cli import REPO, cli_env

PROBE = """
import resource, sys, threading
if sys.argv[1] == "keep":
    from launchers.reference.allocator import keep_freed_memory
    assert keep_freed_memory()
from launchers.reference.engine import ReferenceEngine
from launchers.reference.engine_api import EngineSettings
engine = ReferenceEngine(EngineSettings(threads=1, prefix_cache=False))  # the same prompt twice: no cache hit
prompt = engine.encode("The quick brown fox jumps over the lazy dog. " * 700)  # ~6,000 tokens
faults = []
def twice():  # as the server runs it: in a thread other than the main one
    for _ in range(2):
        before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        list(engine.generate(prompt, 2))
        faults.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
thread = threading.Thread(target=twice)
thread.start()
thread.join()
print(faults[1])
"""
FEW = 5_000  # pages (20 MB); a ~6,000-token prefill allocates hundreds of MB of activations


def _second_allocation_faults(mode: str) -> int:
    done = subprocess.run(
        [sys.executable, "-c", PROBE, mode], env=cli_env(), cwd=REPO, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    return int(done.stdout.strip().splitlines()[-1])


def test_freed_memory_is_reused_without_page_faults():
    """With the settings a second prefill faults in a small fraction of what the default allocator faults
    in again (a ratio, not a fixed page count: a busy machine adds a few thousand faults to either)."""
    default = _second_allocation_faults("default")
    assert default > 4 * FEW  # the probe can fail: without the settings the pages are faulted in anew
    assert _second_allocation_faults("keep") * 4 < default
