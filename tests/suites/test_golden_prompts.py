"""Golden prompts: a few cases per suite, rendered, pinned by digest (with a readable excerpt) next to
the suite's VERSION. A change to what a suite renders fails here until its VERSION is bumped (which
also changes its case ids and the runs' reuse key) and the file is regenerated:

    python -m tests.suites.test_golden_prompts --update

The update refuses a changed prompt under an unchanged VERSION.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

import suites
from recall_eval.reuse import DIGEST_TOKENS_PER_WORD, case_digest
from recall_eval.types import Case

GOLDEN = Path(__file__).with_name("golden_prompts.json")
VERSIONS = {name: suite.version for name, suite in suites.REGISTRY.suites().items()}  # every registered suite
GRID = {"lengths": (400, 3000), "depths": (0.0, 50.0, 100.0), "trials": 1, "seed": 0}
PICKS = (0, 2, 5)  # first cell, needle at the end, the longest prompt at the end


def _excerpt(case: Case) -> str:
    first, last = case.messages[0].content, case.messages[-1].content
    return f"{first[:120]} [...] {last[-120:]}"


def rendered(suite: str) -> list[Case]:
    recipes = suites.build_recipes(suite, GRID["lengths"], GRID["depths"], GRID["trials"], GRID["seed"])
    return [recipes[i].render(recipes[i].words_guess(DIGEST_TOKENS_PER_WORD)) for i in PICKS]


def current() -> dict[str, dict]:
    return {
        suite: {
            "version": VERSIONS[suite],
            "cases": [
                {"id": c.id, "digest": case_digest(c), "excerpt": _excerpt(c)} for c in rendered(suite)
            ],
        }
        for suite in sorted(VERSIONS)
    }


def _golden() -> dict[str, dict]:
    return json.loads(GOLDEN.read_text())


@pytest.mark.parametrize("suite", sorted(VERSIONS))
def test_rendered_prompts_match_the_golden_ones_of_this_version(suite):
    pinned, now = _golden()[suite], current()[suite]
    assert pinned["version"] == now["version"], (
        f"suites {suite!r} VERSION is {now['version']}, golden_prompts.json pins {pinned['version']}: "
        "regenerate it with python -m tests.suites.test_golden_prompts --update"
    )
    for old, new in zip(pinned["cases"], now["cases"], strict=True):
        assert (old["id"], old["digest"]) == (new["id"], new["digest"]), (
            f"the rendered prompt of {suite} case {old['id']} changed without a VERSION bump: bump VERSION "
            f"in its suites module, then regenerate\n  pinned: {old['excerpt']}\n  now:    {new['excerpt']}"
        )


def test_the_golden_file_pins_every_suite():
    assert set(_golden()) == set(VERSIONS)
    assert all(len(entry["cases"]) == len(PICKS) for entry in _golden().values())


def update() -> None:
    old = _golden() if GOLDEN.exists() else {}
    new = current()
    for suite, entry in new.items():
        before = old.get(suite)
        if before and before["version"] == entry["version"] and before["cases"] != entry["cases"]:
            sys.exit(f"{suite}: prompts changed but VERSION is still {entry['version']}: bump it first")
    GOLDEN.write_text(json.dumps(new, indent=1, ensure_ascii=False) + "\n")
    print(f"wrote {GOLDEN}")


if __name__ == "__main__":
    if sys.argv[1:] != ["--update"]:
        sys.exit("usage: python -m tests.suites.test_golden_prompts --update")
    update()
