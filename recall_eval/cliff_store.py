"""A cliff search's stored format: runs/search-<id>/search.json (versioned) lists every batch of trials the
search ran (length, batch number, its run directory inside the search directory, what it scored) and, once
found, the bracket, the cases spent and the equivalent grid's. Rewritten atomically after every batch, so
running the same search again replays the stored batches and runs only what is missing; fields it does not
know (a newer writer's) are kept through the rewrite."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from recall_eval.store import read_versioned, write_atomically

SEARCH_FILE = "search.json"
SEARCH_FORMAT = 1


class SearchBatch(BaseModel):
    model_config = ConfigDict(frozen=True, extra="allow")  # fields it does not know are kept

    length: int  # target length, server tokens
    batch: int  # 0, 1, ... at this length (its seed is the search's seed + batch)
    run_dir: str  # relative to the search directory
    passes: int
    answered: int
    cases: int


class SearchManifest(BaseModel):
    model_config = ConfigDict(frozen=True, extra="allow")  # fields it does not know are kept

    format_version: int = SEARCH_FORMAT
    search_id: str
    label: str  # the variant or cell searched
    low: int
    high: int
    budget: int  # trials per length at most
    batch_trials: int  # trials per batch (--trials)
    threshold: float
    batches: tuple[SearchBatch, ...] = ()
    held: int | None = None  # longest length that held (None: even MIN fell)
    fell: int | None = None  # shortest length above it that fell (None: even MAX held)
    cases_spent: int | None = None
    grid_lengths: int | None = None  # the equivalent full grid: its lengths ...
    grid_cases: int | None = None  # ... and its cases at the full budget
    lengths: list[dict[str, Any]] = []  # per length tested: trials, passes, answered, recall, decision


def read_search(search_dir: Path) -> SearchManifest | None:
    """The stored search (None before its first batch); a damaged or newer search.json is one line
    naming it (a search is not silently started over on top of one)."""
    path = Path(search_dir) / SEARCH_FILE
    if not path.is_file():
        return None
    return read_versioned(path, SearchManifest, SEARCH_FORMAT, "cliff search file")


def write_search(search_dir: Path, manifest: SearchManifest) -> Path:
    path = Path(search_dir) / SEARCH_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomically(path, json.dumps(manifest.model_dump(mode="json"), indent=2).encode("utf-8"))
    return path
