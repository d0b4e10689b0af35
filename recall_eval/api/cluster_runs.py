"""Variants whose servers are placed on a Ray cluster (`compare --ray`, `study --ray`) run at the same
time: one thread per variant, each launching its server through the cluster's executor. Which servers
actually run together is Ray's decision (resources, queueing: a server that does not fit waits for one
that does); there is no pool of our own. Each run records where and when its servers ran
(placements.json, recall_eval.placement_store).

The caller's hooks are shared: lines are prefixed with the variant and said one at a time; progress is
the quiet kind (one rich live display cannot be shared by threads).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from recall_eval.api.comparing import PlannedVariant, check_targets_first, obtain_run
from recall_eval.api.hooks import Hooks, NoteLevel, QuietProgress, SweepProgress
from recall_eval.api.options import ClusterOptions, CompareOptions
from recall_eval.api.records import RunRecord
from recall_eval.types import Profile

if TYPE_CHECKING:
    from launchers.executors import Executor

T = TypeVar("T")


class VariantHooks(Hooks):
    """One variant's view of the shared hooks: its label before every line, one writer at a time."""

    def __init__(self, inner: Hooks, label: str, lock: threading.Lock):
        self.inner, self.label, self.lock = inner, label, lock

    def note(self, text: str, level: NoteLevel = "info") -> None:
        with self.lock:
            self.inner.note(f"[{self.label}] {text}", level)

    def server_output(self, line: str) -> None:
        with self.lock:
            self.inner.server_output(f"[{self.label}] {line}")

    def launching(self, profile: Profile) -> Any:
        from contextlib import nullcontext

        return nullcontext()

    def sweep_progress(self, total: int, already_done: int, already_passed: int) -> SweepProgress:
        return QuietProgress(total, already_done)

    def run_done(self, record: RunRecord) -> None:
        with self.lock:
            self.inner.run_done(record)


def run_at_once(labels: Sequence[str], hooks: Hooks, work: Callable[[str, Hooks], T]) -> list[T]:
    """work(label, hooks) for every label, each on a thread of its own, all started at once; the
    results in the labels' order. The first error (in the labels' order) is raised once all have
    ended. Threads are daemons: a harness killed or interrupted does not wait for them (its runs are
    then `interrupted (no process)`, resumable; Ray removes the servers with the driver)."""
    lock = threading.Lock()
    results: dict[int, T] = {}
    errors: dict[int, BaseException] = {}

    def one(index: int, label: str) -> None:
        try:
            results[index] = work(label, VariantHooks(hooks, label, lock))
        except BaseException as err:  # re-raised on the caller's thread
            errors[index] = err

    threads = [
        threading.Thread(target=one, args=(index, label), name=f"variant-{label}", daemon=True)
        for index, label in enumerate(labels)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        while thread.is_alive():
            thread.join(0.2)  # short waits: Ctrl-C reaches the caller's thread
    if errors:
        raise errors[min(errors)]
    return [results[index] for index in range(len(labels))]


def on_cluster_at_once(
    labels: Sequence[str], hooks: Hooks, cluster: ClusterOptions, work: Callable[[str, Hooks, Executor], T]
) -> list[T]:
    """work(label, hooks, executor) for every label at once (run_at_once), every server launched through
    one executor on the Ray cluster of `cluster`: the one way `compare --ray` and `study --ray` run."""
    from launchers.executors import open_executor

    with open_executor(cluster.ray, cluster.ray_node_gpus) as executor:
        return run_at_once(labels, hooks, lambda label, own: work(label, own, executor))


def obtain_cluster_runs(
    planned: Sequence[PlannedVariant], hooks: Hooks, options: CompareOptions, reuse: bool
) -> list[RunRecord]:
    """Every variant's run with its server on the Ray cluster of options.cluster; all at once."""
    check_targets_first(planned, options.request, reuse, on_cluster=True)
    by_label = {p.label: p for p in planned}
    return on_cluster_at_once(
        list(by_label),
        hooks,
        options.cluster,
        lambda label, own, executor: obtain_run(by_label[label], own, options.request, reuse, True, executor),
    )
