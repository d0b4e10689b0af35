"""Why a server died, from its exit status and its log: oom, too_long or crash, with the matched line.

The patterns are SGLang 0.5.23's own messages (file given with each), CUDA/PyTorch/NCCL's, and the
C allocator's. Order matters: out-of-memory first (a CUDA OOM also contains "CUDA error"), then
too_long, then crash causes; with no matching line the exit status alone decides (always crash,
except a SIGKILL that the kernel's OOM killer is known to have sent).
"""

from __future__ import annotations

import re
import signal
from collections.abc import Sequence
from dataclasses import dataclass

from recall_eval.types import ServerDeath


@dataclass(frozen=True)
class Pattern:
    outcome: str  # "oom", "too_long", "crash"
    regex: re.Pattern[str]
    reason: str  # one line: what happened


def _p(outcome: str, regex: str, reason: str) -> Pattern:
    return Pattern(outcome, re.compile(regex), reason)


OOM_PATTERNS: tuple[Pattern, ...] = (
    # model_executor/pool_configurator.py (MemoryPoolConfig): the KV pool got no memory at start-up
    _p(
        "oom",
        r"Not enough memory\. Please try to increase --mem-fraction-static",
        "out of memory at start-up: no memory left for the KV cache",
    ),
    _p(
        "oom",
        r"leaves no room for the full KV pool",
        "out of memory at start-up: the SWA pool leaves no room for the KV cache",
    ),
    _p(
        "oom",
        r"Memory pool size is too small",
        "out of memory at start-up: KV pool too small for one request",
    ),
    _p(
        "oom", r"Not enough GPU memory for hybrid", "out of memory at start-up: no memory for the state cache"
    ),
    _p(
        "oom",
        r"state cache is too small to serve any requests",
        "out of memory at start-up: state cache too small",
    ),
    # mem_cache/allocation.py: KV allocation failures while serving
    _p("oom", r"Prefill out of memory", "out of memory during prefill (KV allocation failed)"),
    _p("oom", r"Decode out of memory", "out of memory during decode (KV allocation failed)"),
    _p("oom", r"Out of memory\. Try to lower your batch size", "out of memory: KV allocation failed"),
    _p("oom", r"alloc_req_slots runs out of memory", "out of memory: no request slots left"),
    # managers/schedule_batch.py: retraction could not free enough
    _p(
        "oom",
        r"Out of memory even after retracting",
        "out of memory during decode even after retracting requests",
    ),
    # PyTorch / CUDA / Triton device allocations
    _p(
        "oom",
        r"CUDA out of memory|OutOfMemoryError|CUDA error: out of memory|cudaErrorMemoryAllocation|CUBLAS_STATUS_ALLOC_FAILED|\[CUDA\]: out of memory",
        "CUDA out of memory",
    ),
    # host allocator failures (torch's CPU allocator, malloc, numpy, C++)
    _p(
        "oom",
        r"DefaultCPUAllocator: can't allocate memory|Cannot allocate memory|std::bad_alloc|^\s*MemoryError\b|Unable to allocate [\d.]+ \w?i?B",
        "host memory allocation failed",
    ),
)

TOO_LONG_PATTERNS: tuple[Pattern, ...] = (
    # managers/tokenizer_manager.py: _validate_one_request
    _p(
        "too_long",
        r"is longer than the model's context length",
        "a request was longer than the context length",
    ),
    _p("too_long", r"exceeds the model's maximum context length", "a request exceeded the context length"),
)

CRASH_PATTERNS: tuple[Pattern, ...] = (
    _p("crash", r"ModuleNotFoundError|ImportError|cannot import name", "import error"),
    _p(
        "crash",
        r"NCCL error|ncclInternalError|ncclSystemError|ncclUnhandledCudaError|Watchdog caught collective operation timeout|NCCL WARN",
        "NCCL error",
    ),
    _p(
        "crash",
        r"illegal memory access|device-side assert|CUDA error|CUDA_ERROR|cudaError|CUDNN_STATUS|CUBLAS_STATUS",
        "CUDA error",
    ),
    _p(
        "crash",
        r"Segmentation fault|SIGSEGV|Fatal Python error|core dumped|Aborted \(core",
        "the process crashed (segfault/abort)",
    ),
    _p("crash", r"Address already in use|address already in use", "a port was already in use"),
    # Python's last line of a traceback: "SomeError: message"
    _p(
        "crash",
        r"^\s*(?:[A-Za-z_][\w.]*\.)?[A-Z]\w*(?:Error|Exception|Exit|Interrupt)(?::|$)",
        "uncaught exception",
    ),
    # entrypoints/engine.py, utils/watchdog.py, managers/scheduler.py
    _p(
        "crash",
        r"Scheduler hit an exception|crashed with exit code|Received sigquit from a child process|SIGQUIT received",
        "a server subprocess failed",
    ),
)

ALL_PATTERNS = (*OOM_PATTERNS, *TOO_LONG_PATTERNS, *CRASH_PATTERNS)
_TIMESTAMP = re.compile(r"^\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d[^\]]*\]\s*")


def _message(line: str) -> str:
    """The line without SGLang's "[time TP0]" prefix, for matching anchored patterns."""
    return _TIMESTAMP.sub("", line.rstrip("\n"))


def find_cause(lines: Sequence[str]) -> tuple[Pattern, str] | None:
    """The most telling log line. Groups in order (oom, too_long, crash), patterns in order within a
    group; an oom/too_long pattern keeps its first line, a crash pattern its last (a traceback ends
    with the exception that killed the process)."""
    messages = [(_message(line), line.strip()) for line in lines]
    for group, pick_last in ((OOM_PATTERNS, False), (TOO_LONG_PATTERNS, False), (CRASH_PATTERNS, True)):
        for pattern in group:
            matches = [line for text, line in messages if pattern.regex.search(text)]
            if matches:
                return pattern, matches[-1] if pick_last else matches[0]
    return None


def describe_exit(exit_code: int | None) -> str:
    if exit_code is None:
        return "still running"
    if exit_code < 0:
        try:
            name = signal.Signals(-exit_code).name
        except ValueError:
            name = f"signal {-exit_code}"
        return f"killed by {name}"
    return f"exited with code {exit_code}"


def classify_death(exit_code: int | None, log_lines: Sequence[str], oom_killed: bool = False) -> ServerDeath:
    """Classify a death. oom_killed: the kernel's OOM killer is known to have fired (cgroup counter)."""
    status = describe_exit(exit_code)
    if exit_code == -signal.SIGKILL and oom_killed:
        return ServerDeath(
            outcome="oom",
            reason=f"killed by the kernel OOM killer ({status})",
            log_line=None,
            exit_code=exit_code,
        )
    found = find_cause(log_lines)
    if found is None:
        return ServerDeath(outcome="crash", reason=f"the server {status}", log_line=None, exit_code=exit_code)
    pattern, line = found
    return ServerDeath(
        outcome=pattern.outcome,  # type: ignore[arg-type]
        reason=f"{pattern.reason} ({status})",
        log_line=line,
        exit_code=exit_code,
    )


def relevant_lines(lines: Sequence[str], matched: str | None, count: int = 12) -> list[str]:
    """The log lines worth showing: up to `count` lines ending a little after the matched line, else the tail."""
    cleaned = [line.rstrip("\n") for line in lines if line.strip()]
    if matched is not None:
        for index in range(len(cleaned) - 1, -1, -1):
            if cleaned[index].strip() == matched:
                end = min(len(cleaned), index + 3)
                return cleaned[max(0, end - count) : end]
    return cleaned[-count:]
