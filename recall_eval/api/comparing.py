"""compare: one sweep per variant on identical cases, then a compare directory with its report.

Each variant is a set of profile overrides or a profile name (recall_eval.variants has the syntax);
with base_urls given (one per variant), the variants are labels for running servers, matched by order.
Every variant gets the same RunSpec apart from its label, so the same seed gives the same cases (the
same case ids; lengths are calibrated to each server's tokenizer). Servers to launch start one after
another, each stopped before the next starts, and their runs are marked not interleaved; when every
variant is a running server, the runs go at once with their requests interleaved
(recall_eval.api.interleaving), so the report may test their speeds as pairs.

Reuse policy: a finished run with an identical spec (label aside) and target is reused; an interrupted
or failed one is resumed; otherwise the variant runs from scratch. The compare directory,
runs/compare-<id>/, is named by what is compared, so a rerun of the same compare re-renders the same
report.
"""

from __future__ import annotations

import hashlib
import json
import re
import shlex
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from recall_eval.api.execute import planned_cases
from recall_eval.api.gating import gate_compare, recall_gate
from recall_eval.api.hooks import Hooks
from recall_eval.api.interleaving import execute_interleaved
from recall_eval.api.options import DEFAULT_PROFILE, CompareOptions, RequestOptions, updated
from recall_eval.api.records import CompareRecord, RunRecord
from recall_eval.api.run_file import write_config
from recall_eval.api.sweeping import (
    build_spec,
    check_lengths_of,
    check_target,
    execute,
    external_profile,
    request_auth,
    with_capture,
)
from recall_eval.api.versions import reuse_key_of, run_versions
from recall_eval.compare_store import (
    COMPARE_FILE,
    CompareManifest,
    CompareVariant,
    read_manifest,
    relative_run_dir,
    run_dir_of,
)
from recall_eval.engines import launched
from recall_eval.errors import BadInput, UserError
from recall_eval.formatting import settings_text
from recall_eval.frame import check_scoring
from recall_eval.redact import Redactor
from recall_eval.reuse import key_mismatch
from recall_eval.run_owner import GONE, shown_status
from recall_eval.store import RunStore, list_runs, new_run_id, runs_home
from recall_eval.thinking import THINKING_MAX_TOKENS, is_thinking_run
from recall_eval.types import Profile, RequestSettings, Run, RunSpec
from recall_eval.variants import VARIANT_SYNTAX, check_labels, parse_variant, parse_variants

if TYPE_CHECKING:
    from launchers.executors import Executor

# Profile fields that do not change what a server answers: ignored when looking for a run to reuse.
_IRRELEVANT_PROFILE_FIELDS = frozenset({"name", "port", "host", "ready_timeout_s"})
# not "running" while its process runs (it may still be writing it); a running run whose process is gone
# (recall_eval.run_owner: `interrupted (no process)`) is resumable
_RESUMABLE = ("interrupted", "failed", GONE)


@dataclass(frozen=True)
class PlannedVariant:
    label: str
    spec: RunSpec  # the compare's spec with variant=label
    profile: Profile  # resolved (launched), or engine="external" with base_url
    scoring: str = "lenient"  # the compare's headline verdict, stored in a run it creates (Run.scoring)


def _same_spec(a: RunSpec, b: RunSpec) -> bool:
    """Same cases and the same request settings that change verdicts (RequestSettings' Knob.verdicts);
    the label, how requests were authenticated, and how they were sent (concurrency, timeout, retries)
    do not matter."""
    ignored = {
        "variant": "",
        "api_key_used": False,
        "header_names": (),
        **RequestSettings().settings(verdicts=False),
    }
    return a.model_copy(update=ignored) == b.model_copy(update=ignored)


def plan_compared(labels: Sequence[str], spec: RunSpec, options: CompareOptions) -> list[PlannedVariant]:
    """plan_variants with a compare's target options (a compare and its cliff search plan alike)."""
    return plan_variants(
        list(labels),
        spec,
        options.base_urls,
        options.model,
        options.profile,
        options.profiles_file,
        budget_given=options.grid.max_tokens is not None,
    )


def _knobs_only(label: str) -> dict[str, Any]:
    """The request knobs of a label that is only knobs ("think=on", "effort=high"), else {}."""
    try:
        parsed = parse_variant(label)
    except BadInput:
        return {}
    return parsed.request if parsed.profile is None and not parsed.overrides else {}


def _variant_spec(spec: RunSpec, label: str, knobs: dict[str, Any], thinking_budget: bool) -> RunSpec:
    update: dict[str, Any] = {"variant": label, **knobs}
    if thinking_budget:  # no --max-tokens and some variant thinks: one budget for all, big enough
        update["max_tokens"] = THINKING_MAX_TOKENS
        update["case_budgets"] = False
    return spec.model_copy(update=update)


def target_key(profile: Profile) -> dict[str, Any]:
    """What identifies a target for reuse: the server at a URL, or a profile's result-relevant fields."""
    if not launched(profile):
        return {"base_url": (profile.base_url or "").rstrip("/"), "model": profile.served_model_name}
    return profile.model_dump(mode="json", exclude=set(_IRRELEVANT_PROFILE_FIELDS))


def matching_runs(planned: PlannedVariant, root: Path | None = None) -> list[RunStore]:
    """Stored runs with the variant's spec (label aside), target and reuse key (package and suite
    versions, rendered prompts: recall_eval.reuse), oldest first."""
    wanted = target_key(planned.profile)
    key = reuse_key_of(planned.spec)
    return [
        store
        for store in list_runs(root)
        if store.run.profile is not None
        and _same_spec(store.run.spec, planned.spec)
        and target_key(store.run.profile) == wanted
        and key_mismatch(store.run.versions, key) is None
    ]


def compare_id(planned: Sequence[PlannedVariant]) -> str:
    """Named by what is compared (labels, spec, targets): the same compare maps to the same directory."""
    payload = [
        {"label": p.label, "spec": p.spec.model_dump(mode="json"), "target": target_key(p.profile)}
        for p in planned
    ]
    digest = hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()
    slug = re.sub(r"[^A-Za-z0-9]+", "-", "-vs-".join(p.label for p in planned)).strip("-")[:40]
    return f"{slug}-{digest[:8]}" if slug else digest[:12]


def plan_variants(
    labels: Sequence[str],
    spec: RunSpec,
    base_urls: Sequence[str] | None = None,
    model: str | None = None,
    profile: str | None = None,
    profiles_file: Path | None = None,
    budget_given: bool = True,
) -> list[PlannedVariant]:
    """Resolve every variant before anything starts, so a bad one fails at once (BadInput).

    Request knobs in a variant (effort=high, think=on) go to its spec; with base_urls, a label made only
    of knobs is applied too. budget_given=False (no --max-tokens) gives every variant
    THINKING_MAX_TOKENS when any of them thinks."""
    if base_urls:
        check_labels(labels)
        if profile or profiles_file:
            raise BadInput("--base-url compares running servers: drop --profile/--profiles-file")
        if len(base_urls) != len(labels):
            raise BadInput(
                f"give --base-url once per variant: {len(labels)} variants, {len(base_urls)} --base-url"
            )
        knobs = {label: _knobs_only(label) for label in labels}
        thinking = not budget_given and any(
            is_thinking_run(spec.model_copy(update=k)) for k in knobs.values()
        )
        return [
            PlannedVariant(
                label, _variant_spec(spec, label, knobs[label], thinking), external_profile(url, model)
            )
            for label, url in zip(labels, base_urls, strict=True)
        ]
    if model:
        raise BadInput("--model names the model of a running server: use it with --base-url")
    from launchers.profiles import load_profiles, resolve_profile

    parsed = parse_variants(labels)
    known = load_profiles(profiles_file)
    for variant in parsed:
        if variant.profile is not None and variant.profile not in known:
            raise BadInput(
                f"variant {variant.label!r}: unknown profile {variant.profile!r}; {VARIANT_SYNTAX}; "
                f"known profiles: {', '.join(sorted(known))}"
            )
    thinking = not budget_given and any(is_thinking_run(spec.model_copy(update=v.request)) for v in parsed)
    return [
        PlannedVariant(
            variant.label,
            _variant_spec(spec, variant.label, variant.request, thinking),
            resolve_profile(variant.profile or profile or DEFAULT_PROFILE, variant.overrides, profiles_file),
        )
        for variant in parsed
    ]


def reused_run(planned: PlannedVariant, matches: Sequence[RunStore], hooks: Hooks) -> RunRecord | None:
    """The latest finished match, its report rendered if missing; None when there is none."""
    finished = [store for store in matches if store.run.status == "finished"]
    if not finished:
        return None
    store = finished[-1]
    hooks.note(f"{planned.label}: reusing run {store.run.run_id} ({store.path})")
    if not (store.path / "report.html").is_file():
        import reports

        reports.render_report(store.path)
    return RunRecord.from_store(store, reused=True)


def opened_store(planned: PlannedVariant, matches: Sequence[RunStore], hooks: Hooks) -> RunStore:
    """The latest interrupted or failed match, reopened, else a new run directory."""
    resumable = [store for store in matches if shown_status(store.run) in _RESUMABLE]
    if resumable:
        store = resumable[-1]
        hooks.note(f"{planned.label}: resuming run {store.run.run_id} ({store.path})")
        store.update_run(lambda run: run.model_copy(update={"status": "running", "note": None}))
        return store
    run = Run(
        run_id=new_run_id(planned.spec),
        spec=planned.spec,
        profile=planned.profile,
        versions=run_versions(planned.spec),
        created_at=time.time(),
        cases_planned=planned_cases(planned.spec),
        scoring=planned.scoring,
    )
    store = RunStore.create(run, runs_home())
    hooks.note(f"{planned.label}: run {run.run_id} -> {store.path}")
    if (settings := settings_text(planned.spec)) is not None:
        hooks.note(f"{planned.label}: {settings}")
    return store


def obtain_run(
    planned: PlannedVariant,
    hooks: Hooks,
    request: RequestOptions | None = None,
    reuse: bool = True,
    checked: bool = False,
    executor: Executor | None = None,
) -> RunRecord:
    """The variant's finished run: reused, resumed, or run from scratch (report rendered). checked: its
    target already passed check_target (check_targets_first). executor: where its server is launched
    (default this machine)."""
    matches = matching_runs(planned) if reuse else []
    reused = reused_run(planned, matches, hooks)
    if reused is not None:
        return reused
    if not checked:
        on_cluster = executor is not None and not executor.preflight_here
        check_target(planned.profile, request or RequestOptions(), on_cluster)  # reachable, or preflight
    return execute(opened_store(planned, matches, hooks), planned.profile, hooks, request, executor=executor)


def check_targets_first(
    planned: Sequence[PlannedVariant],
    request: RequestOptions | None = None,
    reuse: bool = True,
    on_cluster: bool = False,
) -> None:
    """Every variant that will run (not a finished run reused) is checked before the first one starts: a
    server to launch passes its preflight (its argv built: a setting its engine does not have is BadInput,
    exit 2), a running one answers. Otherwise `compare fp8 X` would run all of fp8 before X fails."""
    for variant in planned:
        finished = reuse and any(store.run.status == "finished" for store in matching_runs(variant))
        if not finished:
            try:
                check_target(variant.profile, request or RequestOptions(), on_cluster)
            except BadInput as err:  # the profile's engine has no such setting: exit 2, naming the variant
                raise BadInput(f"variant {variant.label!r}: {err}") from None


def obtain_live_runs(
    planned: Sequence[PlannedVariant], hooks: Hooks, request: RequestOptions | None = None, reuse: bool = True
) -> list[RunRecord]:
    """Every variant's finished run when all are running servers: finished runs reused, every other
    server checked before any run directory is opened, then the runs still to do go at once, their
    requests interleaved (one left alone runs by itself, marked not interleaved)."""
    matches = [matching_runs(p) if reuse else [] for p in planned]
    records: list[RunRecord | None] = [reused_run(p, m, hooks) for p, m in zip(planned, matches, strict=True)]
    todo = [i for i, record in enumerate(records) if record is None]
    # a variant with an earlier one's spec and target (one server, two labels) reuses its run, once run
    copies = [
        i for n, i in enumerate(todo) if reuse and any(_same_run(planned[i], planned[j]) for j in todo[:n])
    ]
    todo = [i for i in todo if i not in copies]
    for i in todo:
        check_target(planned[i].profile, request or RequestOptions())
    stores = [opened_store(planned[i], matches[i], hooks) for i in todo]
    profiles = [planned[i].profile for i in todo]
    if len(todo) > 1:
        done = execute_interleaved(stores, profiles, hooks, request)
    else:
        done = [
            execute(store, profile, hooks, request) for store, profile in zip(stores, profiles, strict=True)
        ]
    for i, record in zip(todo, done, strict=True):
        records[i] = record
    for i in copies:
        records[i] = reused_run(planned[i], matching_runs(planned[i]), hooks)
    assert all(record is not None for record in records)  # a failed run raised above
    return [record for record in records if record is not None]


def _same_run(a: PlannedVariant, b: PlannedVariant) -> bool:
    return _same_spec(a.spec, b.spec) and target_key(a.profile) == target_key(b.profile)


def all_live(planned: Sequence[PlannedVariant]) -> bool:
    """Every variant is a running server (nothing to launch): their requests can be interleaved."""
    return not any(launched(p.profile) for p in planned)


def compare_interleaved(runs: Sequence[RunRecord], previous: Sequence[str] | None) -> bool:
    """Were the compared runs' requests interleaved with each other? Runs made in this compare: when
    each run.json says so (every case sent interleaved). A reused run was made before, maybe beside
    another run: only when this compare's last manifest said so of these same runs (`previous`: its
    run directories, when it said interleaved)."""
    if not all(run.run.interleaved for run in runs):
        return False
    if not any(run.reused for run in runs):
        return True
    return previous is not None and list(previous) == [str(run.path.resolve()) for run in runs]


def _age(run: RunRecord) -> float | None:
    """Seconds since a reused run finished: the compare report states it beside that run's numbers."""
    return max(time.time() - run.run.finished_at, 0.0) if run.run.finished_at else None


def write_compare_dir(
    planned: Sequence[PlannedVariant], runs: Sequence[RunRecord], command: str, scoring: str = "lenient"
) -> Path:
    """Write runs/compare-<id>/compare.json and render compare.html; returns the html's path."""
    from reports.compare_report import write_compare

    compare_dir = runs_home() / f"compare-{compare_id(planned)}"
    created_at = time.time()
    previous: list[str] | None = None  # the run dirs that the last manifest said were interleaved
    if (compare_dir / COMPARE_FILE).is_file():
        try:
            last = read_manifest(compare_dir)
        except UserError:
            pass  # a broken compare.json is rewritten below
        else:
            created_at = last.created_at
            if last.interleaved:
                previous = [str(run_dir_of(compare_dir, v).resolve()) for v in last.variants]
    manifest = CompareManifest(
        compare_id=compare_dir.name,
        created_at=created_at,
        command=command,
        variants=tuple(
            CompareVariant(
                label=p.label,
                run_dir=relative_run_dir(compare_dir, run.path),
                reused=run.reused,
                reused_age_s=_age(run) if run.reused else None,
            )
            for p, run in zip(planned, runs, strict=True)
        ),
        interleaved=compare_interleaved(runs, previous),
        scoring=scoring,
    )
    return write_compare(compare_dir, manifest)


def compare(
    variants: Sequence[str],
    options: CompareOptions | None = None,
    /,
    *,
    hooks: Hooks | None = None,
    command: str | None = None,
    **fields: Any,
) -> CompareRecord:
    """Compare server variants on identical cases; returns the compare directory and each variant's run.

    `variants`: profile overrides ("fp8", "bf16", "topk=1024", "fp8,topk=1024"), a profile name, or
    both ("dsv4-flash:bf16,topk=1024"); with base_urls, free labels of the running servers, whose runs
    then go at once with their requests interleaved case by case (compare.json's `interleaved`). Options as
    in `sweep` (a CompareOptions, flat keywords, or both). `command` is recorded in compare.json
    (default: the equivalent `recall-eval compare` line). Raises like `sweep`; RunStopped and
    RunInterrupted carry the variant's label. A bad `fail_under` raises BadInput before anything starts;
    the record's `verdict` says how a CI job should end (recall_eval.exit_codes's exit codes).
    """
    options = updated(options or CompareOptions(), **fields)
    scoring = check_scoring(options.scoring)
    hooks = hooks or Hooks()
    spec = build_spec(options.grid, options.request, capture_indexer=options.capture_indexer)
    check_lengths_of(spec)
    gate = recall_gate(options.fail_under, spec.suites)
    planned = [
        PlannedVariant(p.label, p.spec, with_capture(p.profile, options.capture_indexer), scoring)
        for p in plan_compared(variants, spec, options)
    ]
    reuse = not options.rerun
    if all_live(planned):
        runs = obtain_live_runs(planned, hooks, options.request, reuse)
    elif options.cluster.ray:  # every server on the cluster, the variants at once (Ray places them)
        from recall_eval.api.cluster_runs import obtain_cluster_runs

        runs = obtain_cluster_runs(planned, hooks, options, reuse)
    else:  # servers to launch: one at a time (each stopped before the next starts; memory)
        check_targets_first(planned, options.request, reuse)
        runs = [obtain_run(p, hooks, options.request, reuse, checked=True) for p in planned]
    # compare.json keeps the command line: with the key masked (it may have been typed in it)
    secrets = request_auth(options.request).secrets()
    line = Redactor(secrets).text(command or shlex.join(["recall-eval", "compare", *variants]))
    html = write_compare_dir(planned, runs, line, scoring)
    write_config(html.parent, options)  # the effective configuration, as a run file (secrets left out)
    # the gates judge the compare's headline verdict, whatever a reused run's own report headlines
    runs = [replace(r, run=r.run.model_copy(update={"scoring": scoring})) for r in runs]
    labels = tuple(p.label for p in planned)
    record = CompareRecord(
        path=html.parent,
        report=html,
        labels=labels,
        runs=tuple(runs),
        verdict=gate_compare(labels, runs, gate, options.fail_on_regression),
    )
    from recall_eval.api.ci_gate import write_compare_ci_files

    write_compare_ci_files(record, options, gate)
    return record
