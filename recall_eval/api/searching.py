"""The cliff finder in the library: `--lengths search:MIN..MAX[:BUDGET]` of sweep (and of each study cell).

The policy is recall_eval.cliff (bisection on a log scale, sequential Wilson decisions); this module runs
it: one server for the whole search (a running one, or the profile launched once and held), each batch of
trials a run of its own inside runs/search-<id>/ (its length exact in server tokens, calibrated as every
run is; batch k at a length uses the seed + k, so batches never repeat a case), search.json rewritten after
every batch. The same search run again replays the stored batches and runs only what is missing.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
import time
from collections.abc import Sequence
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

from recall_eval.api.comparing import target_key
from recall_eval.api.execute import planned_cases
from recall_eval.api.hooks import Hooks
from recall_eval.api.options import CompareOptions, RequestOptions, SweepOptions
from recall_eval.api.records import RunRecord
from recall_eval.api.sweeping import (
    build_profile,
    build_spec,
    check_lengths_of,
    check_target,
    execute,
    external_profile,
)
from recall_eval.api.versions import run_versions
from recall_eval.cliff import CliffSearch, LengthSearch, parse_search
from recall_eval.cliff_store import SearchBatch, SearchManifest, read_search, write_search
from recall_eval.engines import launched
from recall_eval.stats import recall_table
from recall_eval.store import RunStore, new_run_id, runs_home
from recall_eval.types import Profile, Run, RunSpec


@dataclass(frozen=True)
class SearchRecord:
    """A finished search: its directory and search.json (bracket, cases spent, the grid's)."""

    path: Path  # runs/search-<id>
    manifest: SearchManifest

    @property
    def lines(self) -> list[str]:
        """What the console prints: the bracket, then the cost against the equivalent grid."""
        m = self.manifest
        if m.held is None:
            where = f"recall falls already at {m.low:,} tokens (the range's shortest): the cliff is below it"
        elif m.fell is None:
            where = f"recall holds up to {m.high:,} tokens (the range's longest): the cliff is above it"
        else:
            where = (
                f"cliff between {m.held:,} (last length that held) and {m.fell:,} tokens (first that fell)"
            )
        return [
            f"{m.label}: {where}; recall >= {m.threshold:g} decided on 95% Wilson intervals",
            f"{m.label}: spent {m.cases_spent:,} cases at {len(m.lengths)} lengths; the full grid "
            f"{m.low:,}..{m.high:,} at this resolution ({m.grid_lengths} lengths x {m.budget} trials) would "
            f"spend {m.grid_cases:,}",
        ]


def _search_id(spec: RunSpec, search: LengthSearch, profile: Profile) -> str:
    payload = {
        "spec": spec.model_dump(mode="json", exclude={"lengths"}),
        "search": dataclasses.asdict(search),
        "target": target_key(profile),
    }
    digest = hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()
    slug = re.sub(r"[^A-Za-z0-9]+", "-", spec.variant).strip("-")[:30]
    return f"search-{slug}-{digest[:8]}" if slug else f"search-{digest[:12]}"


def _tally(record: RunRecord) -> tuple[int, int, int]:
    frame = record.frame
    plain = frame[frame["metric"].isna()] if "metric" in frame else frame
    row = recall_table(plain).iloc[0]
    return int(row["passes"]), int(row["answered"]), len(frame)


def _lengths_table(policy: CliffSearch) -> list[dict]:
    return [
        {
            "length": length,
            "trials": tally.trials,
            "passes": tally.passes,
            "answered": tally.answered,
            "recall": tally.recall,
            "decision": tally.decision,
            "on_budget": tally.on_budget,
        }
        for length, tally in sorted(policy.tallies.items())
    ]


def run_search(
    spec: RunSpec,
    profile: Profile,
    search: LengthSearch,
    hooks: Hooks,
    request: RequestOptions | None = None,
) -> SearchRecord:
    """Find the cliff of `profile` (launched once, or a running server) on `spec`'s suites and depths."""
    path = runs_home() / _search_id(spec, search, profile)
    stored = read_search(path)
    done = {(b.length, b.batch): b for b in stored.batches} if stored else {}
    manifest = SearchManifest(
        **(stored.model_extra or {}) if stored else {},  # a newer writer's fields, kept
        search_id=path.name,
        label=spec.variant,
        low=search.low,
        high=search.high,
        budget=search.budget,
        batch_trials=spec.trials,
        threshold=CliffSearch(search, spec.trials).threshold,
    )
    policy = CliffSearch(search, spec.trials)
    batches: list[SearchBatch] = []
    with ExitStack() as stack:
        target: Profile | None = None
        while (length := policy.next_length()) is not None:
            index = policy.batches_at(length)
            batch = done.get((length, index))
            if batch is None:
                if target is None:
                    target = _held_target(profile, path, hooks, request, stack)
                batch = _run_batch(spec, length, index, target, path, hooks, request)
            policy.record(length, batch.passes, batch.answered, batch.cases)
            batches.append(batch)
            hooks.note(
                f"{spec.variant}: {length:,} tokens, batch {index + 1}: {batch.passes}/{batch.answered} passed"
            )
            manifest = manifest.model_copy(
                update={"batches": tuple(batches), "lengths": _lengths_table(policy)}
            )
            write_search(path, manifest)
    held, fell = policy.bracket()
    cases_per_trial = max(planned_cases(spec.model_copy(update={"lengths": (search.low,), "trials": 1})), 1)
    grid_lengths, grid_cases = policy.grid_equivalent(cases_per_trial)
    manifest = manifest.model_copy(
        update={
            "held": held,
            "fell": fell,
            "cases_spent": policy.cases_spent,
            "grid_lengths": grid_lengths,
            "grid_cases": grid_cases,
            "lengths": _lengths_table(policy),
        }
    )
    write_search(path, manifest)
    return SearchRecord(path, manifest)


def _held_target(
    profile: Profile, path: Path, hooks: Hooks, request: RequestOptions | None, stack: ExitStack
) -> Profile:
    """The server every batch talks to: a running one as it is; a profile launched now, held until the
    search ends (stopped also on errors and Ctrl-C)."""
    check_target(profile, request or RequestOptions())
    if not launched(profile):
        return profile
    from launchers.lifecycle import launch, sigterm_raises_exit

    stack.enter_context(sigterm_raises_exit())
    with hooks.launching(profile):
        server = stack.enter_context(launch(profile, path / "server", echo=hooks.server_output))
    return external_profile(server.endpoint.base_url, server.endpoint.model)


def _run_batch(
    spec: RunSpec,
    length: int,
    index: int,
    target: Profile,
    path: Path,
    hooks: Hooks,
    request: RequestOptions | None,
) -> SearchBatch:
    batch_spec = spec.model_copy(update={"lengths": (length,), "seed": spec.seed + index})
    run = Run(
        run_id=new_run_id(batch_spec),
        spec=batch_spec,
        profile=target,
        versions=run_versions(batch_spec),
        created_at=time.time(),
        cases_planned=planned_cases(batch_spec),
    )
    store = RunStore.create(run, path)
    record = execute(store, target, hooks, request, render=False)
    passes, answered, cases = _tally(record)
    return SearchBatch(
        length=length, batch=index, run_dir=record.path.name, passes=passes, answered=answered, cases=cases
    )


def find_cliff(options: SweepOptions, hooks: Hooks | None = None) -> SearchRecord:
    """sweep with `--lengths search:MIN..MAX[:BUDGET]`: the cliff of its target (see run_search)."""
    hooks = hooks or Hooks()
    search = parse_search(str(options.grid.lengths))
    grid = dataclasses.replace(options.grid, lengths=str(search.low))
    spec = build_spec(grid, options.request, options.variant)
    check_lengths_of(spec)
    return run_search(spec, build_profile(options.target), search, hooks, options.request)


def find_cliffs(
    variants: Sequence[str], options: CompareOptions, hooks: Hooks | None = None
) -> list[SearchRecord]:
    """compare with `--lengths search:MIN..MAX[:BUDGET]`: each variant's cliff on identical cases (the same
    spec and seed; each variant's server launched once, one after another, or each running one as it is)."""
    from recall_eval.api.comparing import plan_compared

    hooks = hooks or Hooks()
    search = parse_search(str(options.grid.lengths))
    grid = dataclasses.replace(options.grid, lengths=str(search.low))
    spec = build_spec(grid, options.request)
    check_lengths_of(spec)
    planned = plan_compared(variants, spec, options)
    return [run_search(p.spec, p.profile, search, hooks, options.request) for p in planned]
