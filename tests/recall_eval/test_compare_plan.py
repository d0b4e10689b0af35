"""Planning a compare: variants resolved to profiles, which stored runs count as reusable, compare ids."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from recall_eval.api.comparing import PlannedVariant, compare_id, matching_runs, plan_variants
from recall_eval.api.versions import package_version, run_versions
from recall_eval.errors import BadInput
from recall_eval.store import RunStore, new_run_id, runs_home
from recall_eval.types import Profile, Run, RunSpec, RunStatus

SPEC = RunSpec(lengths=(338, 1000), depths=(0.0, 100.0), trials=1, seed=7)


def store(
    planned: PlannedVariant,
    status: RunStatus = "finished",
    versions: dict[str, str] | None = None,
    **spec_changes: object,
) -> RunStore:
    spec = planned.spec.model_copy(update=spec_changes)
    run = Run(
        run_id=new_run_id(spec),
        spec=spec,
        profile=planned.profile,
        status=status,
        versions={**run_versions(spec), **(versions or {})},
        created_at=time.time(),
    )
    return RunStore.create(run, runs_home())


def test_override_variants_resolve_on_the_profile() -> None:
    fp8, bf16, topk = plan_variants(["fp8", "bf16", "reference:bf16,topk=1024"], SPEC)
    assert (fp8.profile.name, fp8.profile.index_k_dtype) == ("reference", "fp8")
    assert bf16.profile.index_k_dtype == "bf16"
    assert (topk.profile.index_k_dtype, topk.profile.index_topk) == ("bf16", 1024)
    assert [p.spec.variant for p in (fp8, bf16, topk)] == ["fp8", "bf16", "reference:bf16,topk=1024"]
    # The same cases for every variant: only the label differs.
    assert fp8.spec.model_copy(update={"variant": "x"}) == topk.spec.model_copy(update={"variant": "x"})


def test_profile_name_variant_and_user_profiles_file(tmp_path: Path) -> None:
    profiles = tmp_path / "mine.toml"
    profiles.write_text('[profiles.ref-small]\nbase = "reference"\ncontext_length = 4096\n')
    plain, small = plan_variants(["reference", "ref-small:topk=64"], SPEC, profiles_file=profiles)
    assert plain.profile.context_length is None
    assert (small.profile.context_length, small.profile.index_topk) == (4096, 64)
    with pytest.raises(BadInput, match="unknown profile 'nope'"):
        plan_variants(["fp8", "nope:bf16"], SPEC)


def test_base_url_variants_are_labels() -> None:
    a, b = plan_variants(["old build", "new build"], SPEC, ["http://h:1/", "http://h:2"], model="m")
    assert (a.profile.engine, a.profile.base_url, a.profile.served_model_name) == (
        "external",
        "http://h:1",
        "m",
    )
    assert b.label == "new build" and b.profile.base_url == "http://h:2"
    with pytest.raises(BadInput, match="once per variant: 3 variants, 2 --base-url"):
        plan_variants(["a", "b", "c"], SPEC, ["http://h:1", "http://h:2"])
    with pytest.raises(BadInput, match="drop --profile"):
        plan_variants(["a", "b"], SPEC, ["http://h:1", "http://h:2"], profile="reference")
    with pytest.raises(BadInput, match="'ftp://x'"):
        plan_variants(["a", "b"], SPEC, ["http://h:1", "ftp://x"])
    with pytest.raises(BadInput, match="use it with --base-url"):
        plan_variants(["fp8", "bf16"], SPEC, model="m")


def test_reuse_needs_identical_spec_and_target() -> None:
    fp8, bf16 = plan_variants(["fp8", "bf16"], SPEC)
    same = store(fp8)
    store(fp8, seed=8)  # other cases
    store(fp8, trials=2)
    store(bf16)  # other server
    relabelled = store(fp8, variant="reference:fp8")  # the same run under another label
    moved = RunStore.create(
        Run(
            run_id="moved",
            spec=fp8.spec,
            profile=fp8.profile.model_copy(update={"port": 30123}),  # the port does not change answers
            status="interrupted",
            versions=run_versions(fp8.spec),
            created_at=time.time(),
        ),
        runs_home(),
    )
    found = {s.path for s in matching_runs(fp8)}
    assert found == {same.path, relabelled.path, moved.path}


def test_reuse_needs_the_same_package_suites_and_prompts() -> None:
    fp8, _ = plan_variants(["fp8", "bf16"], SPEC)
    same = store(
        fp8, versions={"python": "3.99.0", "server": "other", "event_loop": "asyncio"}
    )  # no prompt change
    store(fp8, versions={"recall-eval": "0.0.1"})
    store(fp8, versions={"suite:needle": "0"})
    store(fp8, versions={"prompts": "0" * 64})  # a lexicon edit: same case ids, other prompts
    store(fp8, versions={"scoring": "0"})  # verdicts from other scoring rules
    legacy = store(fp8)
    legacy.write_run(legacy.run.model_copy(update={"versions": {"recall-eval": package_version()}}))
    assert [s.path for s in matching_runs(fp8)] == [same.path]


def test_reuse_ignores_what_changes_no_verdict_but_not_what_does() -> None:
    """Concurrency, the request timeout and retries pace a run, they do not judge it: a run that
    differs only in them is reused; one with another answer budget or knob is not."""
    fp8, _ = plan_variants(["fp8", "bf16"], SPEC)
    paced = store(fp8, concurrency=8, request_timeout_s=30.0, retries=0)
    store(fp8, max_tokens=64)
    store(fp8, reasoning_effort="high")
    assert [s.path for s in matching_runs(fp8)] == [paced.path]


def test_reuse_of_running_servers_is_by_url_and_model() -> None:
    a, _ = plan_variants(["a", "b"], SPEC, ["http://h:1", "http://h:2"])
    hit = store(a)
    other_model = a.profile.model_copy(update={"served_model_name": "other"})
    store(PlannedVariant("a", a.spec, other_model))
    store(PlannedVariant("a", a.spec, Profile(name="external", engine="external", base_url="http://h:3")))
    assert [s.path for s in matching_runs(a)] == [hit.path]


def test_compare_id_names_what_is_compared() -> None:
    first = plan_variants(["fp8", "bf16"], SPEC)
    assert compare_id(first) == compare_id(plan_variants(["fp8", "bf16"], SPEC))
    assert compare_id(first).startswith("fp8-vs-bf16-")
    assert compare_id(first) != compare_id(plan_variants(["bf16", "fp8"], SPEC))
    assert compare_id(first) != compare_id(
        plan_variants(["fp8", "bf16"], SPEC.model_copy(update={"seed": 1}))
    )
