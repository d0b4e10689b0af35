"""What a run records as its versions, and the reuse key cut from them: the package, Python, the event
loop, the server, and the grid's suite versions and prompt digest (recall_eval.reuse). Here, in the library
layer, because the key needs the suites."""

from __future__ import annotations

import platform

import suites
from recall_eval import event_loop
from recall_eval.reuse import PROMPTS_KEY, SCORING_KEY, VERSION_KEY, key_mismatch
from recall_eval.store import RunStore
from recall_eval.types import RunSpec
from recall_eval.verdicts import SCORING_VERSION
from recall_eval.version import package_version

# what a run records about the machine that measured it, but that a reused run need not share
NOT_IN_REUSE_KEY = ("python", "event_loop")


def versions(server_version: str | None = None) -> dict[str, str]:
    found = {
        "recall-eval": package_version(),
        "python": platform.python_version(),
        "event_loop": event_loop.loop_name(),  # the client-side timings were taken on it
    }
    if server_version:
        found["server"] = server_version
    return found


def run_versions(spec: RunSpec) -> dict[str, str]:
    """What a new run records in run.json's versions: the package, Python, and the reuse key of its grid
    (suite versions and the rendered prompts' digest; see recall_eval.reuse)."""
    key = suites.reuse_key(package_version(), spec.suites, spec.lengths, spec.depths, spec.trials, spec.seed)
    return {**versions(), **key, SCORING_KEY: str(SCORING_VERSION)}


def reuse_key_of(spec: RunSpec) -> dict[str, str]:
    """The entries of run_versions that a reused run must share (not Python's version, nor the loop)."""
    return {name: value for name, value in run_versions(spec).items() if name not in NOT_IN_REUSE_KEY}


def changed_prompts(store: RunStore) -> str | None:
    """Why a stored run's cases would not be the ones the suites render now (None: they are). Only the
    suite versions and the prompts' digest count here (a package upgrade alone may finish a run); a run
    that predates the digest cannot be checked."""
    stored = store.run.versions
    if PROMPTS_KEY not in stored:
        return None
    key = {
        name: value
        for name, value in reuse_key_of(store.run.spec).items()
        if name not in (VERSION_KEY, SCORING_KEY)
    }
    return key_mismatch(stored, key)


def changed_scoring(store: RunStore) -> str | None:
    """Why a stored run's verdicts would not be the ones this recall-eval gives (None: they are)."""
    return key_mismatch(store.run.versions, {SCORING_KEY: str(SCORING_VERSION)})
