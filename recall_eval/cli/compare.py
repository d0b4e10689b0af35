"""`recall-eval compare A B [C ...]`: one sweep per variant on identical cases, then a compare report.

Each variant is a set of profile overrides or a profile name (recall_eval.variants has the syntax);
with --base-url given once per variant, the variants are labels for running servers, matched by order.
Every variant gets the same RunSpec apart from its label, so the same seed gives the same cases (the
same case ids; lengths are calibrated to each server's tokenizer). Servers start one after another,
each stopped before the next starts. A finished run with an identical spec and target is reused; an
interrupted or failed one is resumed. The compare directory, runs/compare-<id>/, is named by what is
compared, so a rerun of the same compare re-renders the same report.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
import shlex
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import typer

import suites
from recall_eval.cli.app import app, console
from recall_eval.cli.common import (
    external_profile,
    open_in_browser,
    render_report,
    resume_command,
    run_versions,
    summary_line,
)
from recall_eval.cli.sweep import DEFAULT_DEPTHS, DEFAULT_LENGTHS, DEFAULT_PROFILE, with_capture
from recall_eval.cli.sweep_flow import StopMessages, check_reachable, run_recorded
from recall_eval.errors import BadInput, UserError
from recall_eval.grid import parse_depths, parse_lengths, parse_suites
from recall_eval.reuse import key_mismatch
from recall_eval.store import RunStore, list_runs, new_run_id, runs_home
from recall_eval.types import Profile, Run, RunSpec
from recall_eval.variants import check_labels, parse_variants
from reports.compare_report import (
    COMPARE_FILE,
    CompareManifest,
    CompareVariant,
    read_manifest,
    relative_run_dir,
    write_compare,
)

# Profile fields that do not change what a server answers: ignored when looking for a run to reuse.
_IRRELEVANT_PROFILE_FIELDS = frozenset({"name", "port", "host", "ready_timeout_s"})
_RESUMABLE = ("interrupted", "failed")  # not "running": another process may still be writing it


@dataclass(frozen=True)
class PlannedVariant:
    label: str
    spec: RunSpec  # the compare's spec with variant=label
    profile: Profile  # resolved (launched), or engine="external" with base_url


def _same_spec(a: RunSpec, b: RunSpec) -> bool:
    return a.model_copy(update={"variant": ""}) == b.model_copy(update={"variant": ""})


def target_key(profile: Profile) -> dict[str, Any]:
    """What identifies a target for reuse: the server at a URL, or a profile's result-relevant fields."""
    if profile.engine == "external":
        return {"base_url": (profile.base_url or "").rstrip("/"), "model": profile.served_model_name}
    return profile.model_dump(mode="json", exclude=set(_IRRELEVANT_PROFILE_FIELDS))


def matching_runs(planned: PlannedVariant, root: Path | None = None) -> list[RunStore]:
    """Stored runs with the variant's spec (label aside), target and reuse key (package and suite
    versions, rendered prompts: recall_eval.reuse), oldest first."""
    wanted = target_key(planned.profile)
    key = {name: value for name, value in run_versions(planned.spec).items() if name != "python"}
    return [
        store
        for store in list_runs(root)
        if store.run.profile is not None
        and _same_spec(store.run.spec, planned.spec)
        and target_key(store.run.profile) == wanted
        and key_mismatch(store.run.versions, key) is None
    ]


def compare_id(planned: list[PlannedVariant]) -> str:
    """Named by what is compared (labels, spec, targets): the same compare maps to the same directory."""
    payload = [
        {"label": p.label, "spec": p.spec.model_dump(mode="json"), "target": target_key(p.profile)}
        for p in planned
    ]
    digest = hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()
    slug = re.sub(r"[^A-Za-z0-9]+", "-", "-vs-".join(p.label for p in planned)).strip("-")[:40]
    return f"{slug}-{digest[:8]}" if slug else digest[:12]


def _spec(options: dict[str, Any]) -> RunSpec:
    for name in ("trials", "concurrency", "max_tokens"):
        if options[name] < 1:
            raise BadInput(f"--{name.replace('_', '-')} {options[name]}: must be at least 1")
    if options["request_timeout"] <= 0:
        raise BadInput(f"--request-timeout {options['request_timeout']:g}: must be above 0")
    return RunSpec(
        suites=parse_suites(options["suite"], tuple(sorted(suites.SUITES))),
        lengths=parse_lengths(options["lengths"]),
        depths=parse_depths(options["depths"]),
        trials=options["trials"],
        seed=options["seed"],
        max_tokens=options["max_tokens"],
        concurrency=options["concurrency"],
        request_timeout_s=options["request_timeout"],
        capture_indexer=options.get("capture_indexer", False),
    )


def plan_variants(
    labels: list[str],
    spec: RunSpec,
    base_urls: list[str] | None = None,
    model: str | None = None,
    profile: str | None = None,
    profiles_file: Path | None = None,
) -> list[PlannedVariant]:
    """Resolve every variant before anything starts, so a bad one fails at once (BadInput)."""
    if base_urls:
        check_labels(labels)
        if profile or profiles_file:
            raise BadInput("--base-url compares running servers: drop --profile/--profiles-file")
        if len(base_urls) != len(labels):
            raise BadInput(
                f"give --base-url once per variant: {len(labels)} variants, {len(base_urls)} --base-url"
            )
        planned = []
        for label, url in zip(labels, base_urls, strict=True):
            target = external_profile(url, model)
            planned.append(PlannedVariant(label, spec.model_copy(update={"variant": label}), target))
        return planned
    if model:
        raise BadInput("--model names the model of a running server: use it with --base-url")
    from launchers.profiles import resolve_profile

    return [
        PlannedVariant(
            variant.label,
            spec.model_copy(update={"variant": variant.label}),
            resolve_profile(variant.profile or profile or DEFAULT_PROFILE, variant.overrides, profiles_file),
        )
        for variant in parse_variants(labels)
    ]


def run_variant(store: RunStore, planned: PlannedVariant) -> None:
    """Run (or finish) one variant's sweep: launch its server, run the pending cases, stop the server."""
    label = planned.label
    run_recorded(
        store,
        planned.profile,
        console,
        StopMessages(
            interrupted=f"[yellow]interrupted[/yellow] in variant {label}: rerun the same compare to resume "
            f"(or {resume_command(store.path)})",
            stopped=lambda err: f"variant {label!r}: {err}; rerun the same compare to resume",
            failed=lambda err: f"variant {label!r}: {err}",
        ),
    )


def obtain_run(planned: PlannedVariant, reuse: bool = True) -> tuple[Path, bool]:
    """The variant's finished run dir and whether it was reused: reuse, resume, or run from scratch."""
    matches = matching_runs(planned) if reuse else []
    finished = [store for store in matches if store.run.status == "finished"]
    if finished:
        store = finished[-1]
        console.print(f"{planned.label}: reusing run {store.run.run_id} ({store.path})", highlight=False)
        if not (store.path / "report.html").is_file():
            render_report(store.path)
        return store.path, True
    if planned.profile.engine == "external":
        check_reachable(planned.profile)
    resumable = [store for store in matches if store.run.status in _RESUMABLE]
    if resumable:
        store = resumable[-1]
        console.print(f"{planned.label}: resuming run {store.run.run_id} ({store.path})", highlight=False)
        store.write_run(store.run.model_copy(update={"status": "running", "note": None}))
    else:
        run = Run(
            run_id=new_run_id(planned.spec),
            spec=planned.spec,
            profile=planned.profile,
            versions=run_versions(planned.spec),
            created_at=time.time(),
        )
        store = RunStore.create(run, runs_home())
        console.print(f"{planned.label}: run {run.run_id} -> {store.path}", highlight=False)
    run_variant(store, planned)
    render_report(store.path)
    console.print(f"{planned.label}: {summary_line(store.results())}", highlight=False)
    return store.path, False


def write_compare_dir(planned: list[PlannedVariant], runs: list[tuple[Path, bool]], command: str) -> Path:
    compare_dir = runs_home() / f"compare-{compare_id(planned)}"
    created_at = time.time()
    if (compare_dir / COMPARE_FILE).is_file():
        try:
            created_at = read_manifest(compare_dir).created_at
        except UserError:
            pass  # a broken compare.json is rewritten below
    manifest = CompareManifest(
        compare_id=compare_dir.name,
        created_at=created_at,
        command=command,
        variants=tuple(
            CompareVariant(label=p.label, run_dir=relative_run_dir(compare_dir, run_dir), reused=reused)
            for p, (run_dir, reused) in zip(planned, runs, strict=True)
        ),
    )
    return write_compare(compare_dir, manifest)


@app.command()
def compare(
    variants: Annotated[
        list[str],
        typer.Argument(
            help="Variants: profile overrides (fp8, bf16, topk=1024, fp8,topk=1024, mem=0.8, ctx=32768), "
            "a profile name (dsv4-flash), or both (dsv4-flash:bf16,topk=1024). With --base-url: labels.",
            show_default=False,
        ),
    ],
    lengths: Annotated[
        str, typer.Option(help="Context lengths: A..B (8 geometric points), A..B:N, or A,B,C.")
    ] = DEFAULT_LENGTHS,
    depths: Annotated[
        str, typer.Option(help="Needle depths in percent: A..B:N (linear) or A,B,C.")
    ] = DEFAULT_DEPTHS,
    trials: Annotated[int, typer.Option(help="Independent needles per (length, depth) cell.")] = 2,
    seed: Annotated[int, typer.Option(help="Seed of every generated case (the same for every variant).")] = 0,
    suite: Annotated[str, typer.Option(help="Comma-separated suites.")] = "needle",
    max_tokens: Annotated[int, typer.Option("--max-tokens", help="Answer budget in tokens.")] = 32,
    concurrency: Annotated[int, typer.Option(help="Requests in flight at once.")] = 1,
    request_timeout: Annotated[float, typer.Option("--request-timeout", help="Seconds per request.")] = 600.0,
    profile: Annotated[
        str | None, typer.Option(help=f"Profile the override variants apply to. (default: {DEFAULT_PROFILE})")
    ] = None,
    profiles_file: Annotated[
        Path | None, typer.Option("--profiles-file", help="TOML file with more profiles.")
    ] = None,
    base_url: Annotated[
        list[str] | None,
        typer.Option("--base-url", help="A running server per variant, in the variants' order (no launch)."),
    ] = None,
    model: Annotated[
        str | None, typer.Option(help="Model name to send to --base-url servers. (default: the first served)")
    ] = None,
    rerun: Annotated[
        bool, typer.Option("--rerun", help="Run every variant again instead of reusing finished runs.")
    ] = False,
    capture_indexer: Annotated[
        bool,
        typer.Option(
            "--capture-indexer",
            help="Record per indexer layer whether each variant's DSA indexer selected the needle "
            "(SGLang /generate with return_indexer_topk); the report shows coverage side by side.",
        ),
    ] = False,
    open_report: Annotated[
        bool, typer.Option("--open", help="Open the compare report in the browser.")
    ] = False,
) -> None:
    """Compare server variants on identical cases: paired recall test, difference heatmaps, throughput."""
    spec = _spec(dict(locals()))
    planned = [
        dataclasses.replace(p, profile=with_capture(p.profile, capture_indexer))
        for p in plan_variants(list(variants), spec, base_url, model, profile, profiles_file)
    ]
    runs = [obtain_run(p, reuse=not rerun) for p in planned]
    command = shlex.join(["recall-eval", "compare", *sys.argv[2:]]) if sys.argv[1:2] == ["compare"] else None
    html = write_compare_dir(planned, runs, command or shlex.join(["recall-eval", "compare", *variants]))
    console.print(f"compare directory: {html.parent}", highlight=False)
    print(html)
    if open_report:
        open_in_browser(html)
