"""Library options: flat keywords routed to their group, defaults filled once, resume's allowed options."""

from __future__ import annotations

import dataclasses

import pytest

from recall_eval import api
from recall_eval.api.options import DEFAULT_GRID, DEFAULT_REQUEST, declared, flag_of, given, resolved
from recall_eval.api.sweeping import build_profile, build_spec, resume_options
from recall_eval.errors import BadInput
from recall_eval.types import RunSpec


def test_flat_keywords_go_to_their_group_and_unknown_ones_are_refused() -> None:
    options = api.SweepOptions.of(lengths="338..4096", concurrency=4, index_topk=64, variant="x")
    assert options.grid.lengths == "338..4096" and options.grid.trials is None
    assert options.request.concurrency == 4 and options.target.index_topk == 64 and options.variant == "x"
    assert given(options.target) == ["index_topk"]
    with pytest.raises(TypeError, match="no option 'lenghts'"):
        api.SweepOptions.of(lenghts="1000")
    # keywords add to a given group instead of replacing it
    grid = api.GridOptions(trials=3)
    both = api.CompareOptions.of(grid=grid, seed=9)
    assert (both.grid.trials, both.grid.seed) == (3, 9)


def test_every_option_is_declared_once_with_flag_help_and_default() -> None:
    groups = (api.GridOptions, api.RequestOptions, api.TargetOptions, api.CiOptions, api.ClusterOptions)
    for group in (*groups, api.SweepOptions, api.CompareOptions, api.ResumeOptions):
        for field in dataclasses.fields(group):
            found = declared(group, field.name)
            if found is None:  # a group, or resume's base_url/port/fail_under (sweep's flags, passed on)
                assert field.name in (
                    "grid",
                    "request",
                    "target",
                    "ci",
                    "cluster",
                    "base_url",
                    "port",
                    "fail_under",
                ), field.name
                continue
            assert found.name.startswith("--") and found.help, field.name
    flags = [declared(g, f.name).flag for g in groups for f in dataclasses.fields(g)]
    assert len(flags) == len(set(flags))  # one flag, one field
    assert flag_of(api.RequestOptions, "request_timeout_s") == "--request-timeout"
    # the defaults are the declarations' (RunSpec's for what it stores), unset ones stay unset
    assert (
        DEFAULT_GRID.trials == RunSpec.model_fields["trials"].default and DEFAULT_GRID.lengths == "338..22597"
    )
    assert (
        DEFAULT_REQUEST.api_key is None
        and DEFAULT_REQUEST.concurrency == RunSpec.model_fields["concurrency"].default
    )
    assert resolved(api.GridOptions(trials=5)) == dataclasses.replace(DEFAULT_GRID, trials=5)
    assert given(api.SweepOptions(render_report=True)) == [] and given(
        api.SweepOptions(render_report=False)
    ) == ["render_report"]


def test_spec_from_defaults_and_lists() -> None:
    spec = build_spec(api.GridOptions(lengths=[1000, 500], depths=[0, 100]), api.RequestOptions())
    assert spec == RunSpec(
        suites=("needle",),
        lengths=(500, 1000),
        depths=(0.0, 100.0),
        trials=2,
        seed=0,
        max_tokens=32,
        max_tokens_given=False,  # the default budget: a reasoning server gets the thinking budget
    )
    with pytest.raises(BadInput, match="--trials 0: must be at least 1"):
        build_spec(api.GridOptions(trials=0), api.RequestOptions())
    with pytest.raises(BadInput, match="--request-timeout 0: must be above 0"):
        build_spec(api.GridOptions(), api.RequestOptions(request_timeout_s=0))


def test_profile_from_target_options() -> None:
    launched = build_profile(api.TargetOptions(index_k_dtype="bf16", index_topk=128))
    assert (launched.name, launched.index_k_dtype, launched.index_topk) == ("reference", "bf16", 128)
    external = build_profile(api.TargetOptions(base_url="http://127.0.0.1:9/", model="m"))
    assert (external.engine, external.base_url, external.served_model_name) == (
        "external",
        "http://127.0.0.1:9",
        "m",
    )
    with pytest.raises(BadInput, match="drop --profile and the profile overrides"):
        build_profile(api.TargetOptions(base_url="http://127.0.0.1:9", tp=2))
    with pytest.raises(BadInput, match="use it with --base-url"):
        build_profile(api.TargetOptions(model="m"))


def test_resume_takes_request_options_and_the_target_address_only() -> None:
    allowed = api.SweepOptions.of(concurrency=8, base_url="http://h:1", render_report=False)
    resume = resume_options(allowed)
    assert (resume.request.concurrency, resume.base_url, resume.render_report) == (8, "http://h:1", False)
    refused = api.SweepOptions.of(lengths="1000", seed=3, mem_fraction_static=0.5, variant="v")
    with pytest.raises(BadInput, match="drop --lengths, --seed, --mem-fraction, --variant"):
        resume_options(refused)


def test_resume_refuses_the_ci_gate_options() -> None:
    """A gate (--baseline, --fail-fast, --junit) starts a new run; a resume does not take them."""
    refused = api.SweepOptions.of(baseline="b.json", fail_fast=True, junit="j.xml")
    with pytest.raises(BadInput, match="drop --baseline, --fail-fast, --junit"):
        resume_options(refused)
