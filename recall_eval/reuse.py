"""When a stored run may stand in for a new one: the reuse key, a pure function of what shapes the prompts.

Case ids hash a suite's parameters and seed, not its text: an edit to a lexicon, a template or the filler
changes the prompts under the same ids, and a comparison would then pair different prompts. So a run
stores, next to its versions in run.json, the key it was made under:

    recall-eval   the package version
    suite:<name>  each suite's VERSION constant (bumped with any change to what it renders)
    prompts       sha256 over every case of the grid rendered at a fixed, tokenizer-free filler size
    scoring       the scoring rules' version (recall_eval.verdicts.SCORING_VERSION): a run scored under
                  other rules is not reused (`recall-eval report --rescore` brings it up to date)

and a run is reused (or resumed) only when every entry of the key is equal. The digest catches what a
forgotten version bump would miss; the golden prompt tests catch the forgotten bump itself.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping

from recall_eval.types import Case, CaseRecipe

# Filler words per token for the digest's rendering: a fixed ratio, so the digest never depends on a
# server's tokenizer (the calibrated prompts differ only in how much filler they hold).
DIGEST_TOKENS_PER_WORD = 1.3
PROMPTS_KEY = "prompts"
VERSION_KEY = "recall-eval"
SCORING_KEY = "scoring"


def case_digest(case: Case) -> str:
    """sha256 of what a model is shown and what counts as right: id, messages, expected answers."""
    h = hashlib.sha256()
    h.update(case.id.encode())
    for message in case.messages:
        h.update(b"\x00" + message.role.encode() + b"\x01" + message.content.encode())
    for answer in case.expected:
        h.update(b"\x02" + answer.encode())
    return h.hexdigest()


def prompt_digest(recipes: Iterable[CaseRecipe]) -> str:
    """One digest of every recipe rendered at DIGEST_TOKENS_PER_WORD, in order."""
    h = hashlib.sha256()
    for recipe in recipes:
        case = recipe.render(recipe.words_guess(DIGEST_TOKENS_PER_WORD))
        h.update(case_digest(case).encode())
    return h.hexdigest()


def reuse_key(package_version: str, suite_versions: Mapping[str, int], digest: str) -> dict[str, str]:
    """The entries a run records in run.json's versions and that a reused run must share."""
    key = {VERSION_KEY: package_version, PROMPTS_KEY: digest}
    key.update({f"suite:{name}": str(version) for name, version in sorted(suite_versions.items())})
    return key


def key_mismatch(stored: Mapping[str, str], wanted: Mapping[str, str]) -> str | None:
    """None when the stored versions carry every entry of the wanted key; else what differs, in words."""
    for name, value in wanted.items():
        have = stored.get(name)
        if have != value:
            if name == PROMPTS_KEY:
                return "the rendered prompts differ" if have else "the run predates prompt digests"
            if name == SCORING_KEY:
                return (
                    f"its verdicts follow scoring version {have or 'unknown'}, this recall-eval scores with "
                    f"version {value} (`recall-eval report --rescore RUN` re-scores it)"
                )
            return f"{name} {have or 'unknown'} != {value}"
    return None
