"""Stored formats that evolve: a run.json of an older format is brought up to today's before it is
validated, one step per version, and a file of a newer format is refused by name (the version of
recall-eval that wrote it, and what to do).

A step takes the JSON object of version N and returns the object of version N + 1. Readers ignore (and
keep) fields they do not know (recall_eval.types' stored models), so adding an optional field needs no
step; a step is for a change of meaning: a field renamed, a value that must be filled in. Each step has
a test that reads a run directory written by the version before it (tests/recall_eval/fixtures/).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from recall_eval.reuse import SCORING_KEY
from recall_eval.types import FORMAT_VERSION


def _v1_to_v2(run: dict[str, Any]) -> dict[str, Any]:
    """Format 2 records the scoring rules' version in `versions` (part of the reuse key). A format-1 run
    was scored by the rules that became SCORING_VERSION 1, the first to be numbered."""
    versions = run.get("versions")
    versions = dict(versions) if isinstance(versions, dict) else {}
    versions.setdefault(SCORING_KEY, "1")
    return {**run, "versions": versions}


# from version N (the key) to N + 1
STEPS: dict[int, Callable[[dict[str, Any]], dict[str, Any]]] = {1: _v1_to_v2}


class NewerFormat(Exception):
    """A file written by a newer recall-eval; str() says which and what to do."""


def format_of(data: dict[str, Any]) -> int:
    version = data.get("format_version", 1)
    return version if isinstance(version, int) else 1


def migrate_run(data: dict[str, Any], what: str = "run.json") -> dict[str, Any]:
    """run.json's object brought up to FORMAT_VERSION; NewerFormat for one written by a newer recall-eval."""
    version = format_of(data)
    if version > FORMAT_VERSION:
        writer = (
            data.get("versions", {}).get("recall-eval") if isinstance(data.get("versions"), dict) else None
        )
        raise NewerFormat(
            f"{what} was written by a newer recall-eval{f' {writer}' if writer else ''} (run format {version}; "
            f"this one reads {FORMAT_VERSION} and older); upgrade recall-eval to read it"
        )
    while version < FORMAT_VERSION:
        data = {**STEPS[version](data), "format_version": version + 1}
        version += 1
    return data
