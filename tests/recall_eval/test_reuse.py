"""The reuse key: versions of the package and suites plus a digest of the rendered prompts."""

from __future__ import annotations

import suites
from recall_eval.reuse import key_mismatch, reuse_key
from suites import needle

GRID = (["needle"], [400, 2000], [0.0, 100.0], 1, 0)


def test_key_is_deterministic_and_names_package_and_suite_versions():
    key = suites.reuse_key("0.1.0", *GRID)
    assert key == suites.reuse_key("0.1.0", *GRID)
    assert key["recall-eval"] == "0.1.0" and key["suite:needle"] == str(needle.VERSION)
    assert len(key["prompts"]) == 64
    assert key_mismatch(key, key) is None
    assert (
        key_mismatch({**key, "stored-extra": "x"}, key) is None
    )  # other versions (python, server) may differ


def test_a_template_edit_under_the_same_case_ids_changes_the_digest(monkeypatch):
    before = suites.reuse_key("0.1.0", *GRID)
    ids = [r.render(0).id for r in suites.build_recipes("needle", *GRID[1:])]
    edited = tuple(
        (lead.replace(" is {value}", " is: {value}"), ask) for lead, ask in needle.NEEDLE_TEMPLATES
    )
    monkeypatch.setattr(needle, "NEEDLE_TEMPLATES", edited)
    assert [r.render(0).id for r in suites.build_recipes("needle", *GRID[1:])] == ids  # ids do not see it
    after = suites.reuse_key("0.1.0", *GRID)
    assert after["prompts"] != before["prompts"]
    assert key_mismatch(before, after) == "the rendered prompts differ"


def test_mismatch_names_what_differs():
    key = reuse_key("0.2.0", {"needle": 2}, "ab" * 32)
    assert key_mismatch({"recall-eval": "0.1.0"}, key) == "recall-eval 0.1.0 != 0.2.0"
    assert key_mismatch({**key, "suite:needle": "1"}, key) == "suite:needle 1 != 2"
    assert (
        key_mismatch({"recall-eval": "0.2.0", "suite:needle": "2"}, key) == "the run predates prompt digests"
    )


def test_resume_refuses_a_run_whose_prompts_changed(tmp_path):
    import time

    import pytest

    from recall_eval import api
    from recall_eval.api.versions import run_versions
    from recall_eval.errors import BadInput
    from recall_eval.store import RunStore
    from recall_eval.types import Profile, Run, RunSpec

    spec = RunSpec(lengths=(400,), depths=(50.0,), trials=1)
    stale = {**run_versions(spec), "prompts": "0" * 64}
    profile = Profile(name="reference", engine="reference", port=0)
    run = Run(
        run_id="old", spec=spec, profile=profile, versions=stale, status="interrupted", created_at=time.time()
    )
    store = RunStore.create(run, tmp_path)
    with pytest.raises(
        BadInput, match="the suites changed since this run started .the rendered prompts differ."
    ):
        api.resume(store.path)
    assert RunStore.open(store.path).run.status == "interrupted"  # refused before anything was touched
