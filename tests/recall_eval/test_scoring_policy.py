"""The scoring policy as a table: answers written the way real models write them, with the lenient and
the strict verdict each must get (README, "Scoring"). A row that flips shows which rule changed."""

from __future__ import annotations

import sys
import unicodedata

import pytest

from recall_eval.scoring import DASHES, ZERO_WIDTH, PromptText, normalise, score_completion
from recall_eval.types import Case, ChatMessage, Completion, NeedleSpan

VALUE = "HELIX-1949-WALRUS"
FILLER = (
    "The quiet harbour town woke slowly while the baker carried bread along the old stone wall and "
    "the fishermen mended their nets beside the grey water of the bay before the morning bell rang. "
) * 3
QUESTION = "What is the secret code for the Falcon vault? Answer with the code only."


def needle_case(depth_zero: bool = True) -> Case:
    """A needle case shaped like suites/needle.py renders one: the fact at depth 0, then filler, the question."""
    fact = f"The secret code for the Falcon vault is {VALUE}."
    haystack = f"{fact} {FILLER}" if depth_zero else f"{FILLER}{fact}"
    start = haystack.index(VALUE)
    return Case(
        id="c1",
        suite="needle",
        messages=(ChatMessage(role="user", content=f"{haystack}\n\n{QUESTION}"),),
        expected=(VALUE,),
        distractors=("HELIX-1949-WALRUD",),
        needle=NeedleSpan(message_index=0, char_start=start, char_end=start + len(VALUE)),
        target_tokens=200,
        depth_percent=0.0,
        seed=0,
    )


ECHO_20 = " ".join(f"{needle_case().messages[0].content}".split()[:20])

# (answer, lenient, strict)
TABLE: list[tuple[str, str, str]] = [
    # plain and case
    ("HELIX-1949-WALRUS", "pass", "pass"),
    ("helix-1949-walrus", "pass", "pass"),
    ("Helix-1949-Walrus", "pass", "pass"),
    ("The code is HELIX-1949-WALRUS.", "pass", "pass"),
    # every dash a model may write
    ("HELIX\u20101949\u2010WALRUS", "pass", "pass"),  # hyphen
    ("HELIX\u20111949\u2011WALRUS", "pass", "pass"),  # non-breaking hyphen
    ("HELIX\u20121949\u2012WALRUS", "pass", "pass"),  # figure dash
    ("HELIX\u20131949\u2013WALRUS", "pass", "pass"),  # en dash
    ("HELIX\u20141949\u2014WALRUS", "pass", "pass"),  # em dash
    ("HELIX\u20151949\u2015WALRUS", "pass", "pass"),  # horizontal bar
    ("HELIX\u22121949\u2212WALRUS", "pass", "pass"),  # minus sign
    ("HELIX\uff0d1949\uff0dWALRUS", "pass", "pass"),  # full-width hyphen-minus
    ("HELIX-\u200b1949-WALRUS", "pass", "pass"),  # zero-width space
    ("HELIX\u00ad-1949-WALRUS", "pass", "pass"),  # soft hyphen
    ("\uff28\uff25\uff2c\uff29\uff38-1949-WALRUS", "pass", "pass"),  # full-width letters (NFKC)
    # spacing around separators, spaces for hyphens, no-break spaces
    ("HELIX - 1949 - WALRUS", "pass", "pass"),
    ("HELIX \u2013 1949 \u2013 WALRUS", "pass", "pass"),
    ("HELIX 1949 WALRUS", "pass", "pass"),
    ("HELIX\u00a0-\u00a01949\u00a0-\u00a0WALRUS", "pass", "pass"),
    ("HELIX-1949 -WALRUS", "pass", "pass"),
    ("HELIX1949WALRUS", "miss", "miss"),  # separators dropped: another string
    # markdown, quotes, punctuation
    ("**HELIX-1949-WALRUS**", "pass", "pass"),
    ("`HELIX-1949-WALRUS`", "pass", "pass"),
    ("```\nHELIX-1949-WALRUS\n```", "pass", "pass"),
    ('"HELIX-1949-WALRUS"', "pass", "pass"),
    ("\u201cHELIX-1949-WALRUS\u201d", "pass", "pass"),
    ("'HELIX-1949-WALRUS'", "pass", "pass"),
    ("Code: *HELIX-1949-WALRUS*!", "pass", "pass"),
    # hedges without another value: committed
    ("I think it is HELIX-1949-WALRUS.", "pass", "pass"),
    ("Probably HELIX-1949-WALRUS, but I am not certain.", "pass", "pass"),
    # corrections and second guesses
    ("ZEBRA-1111-OMEGA. Sorry, correction: HELIX-1949-WALRUS", "pass", "miss"),
    ("HELIX-1949-WALRUS. Sorry, correction: ZEBRA-1111-OMEGA", "pass", "miss"),
    ("HELIX-1949-WALRUS or maybe ZEBRA-1111-OMEGA", "pass", "miss"),
    ("HELIX-1949-WALRUS, ZEBRA-1111-OMEGA or LION-2222-ALPHA", "miss", "miss"),  # a guess list
    ("HELIX-1949-WALRUD, no wait, HELIX-1949-WALRUS", "miss", "miss"),  # names the distractor
    ("HELIX-1949-WALRUS-7", "pass", "miss"),  # the value glued into a longer code
    ("XHELIX-1949-WALRUS", "pass", "miss"),
    ("The code is HELIX-1949-WALRUS. HELIX-1949-WALRUS.", "pass", "pass"),  # said twice
    # echoes of the prompt
    (ECHO_20, "pass", "miss"),  # the first 20 words of a depth-0 prompt
    (f"The secret code for the Falcon vault is {VALUE}.", "pass", "pass"),  # restates the fact: no echo
    (f"{VALUE}. What is the secret code for the Falcon vault? Answer with the code only.", "pass", "pass"),
    # no value
    ("HELIX-1949", "miss", "miss"),
    ("I don't know.", "miss", "miss"),
    ("ZEBRA-1111-OMEGA", "miss", "miss"),
    ("", "empty", "empty"),
]


@pytest.mark.parametrize(("answer", "lenient", "strict"), TABLE, ids=[repr(row[0])[:40] for row in TABLE])
def test_policy_table(answer, lenient, strict):
    case = needle_case()
    scored = score_completion(
        Completion(text=answer, finish_reason="stop"), case.expected, case.distractors, PromptText(case)
    )
    assert (scored.outcome, scored.strict_outcome) == (lenient, strict), scored
    if lenient == "pass":  # a strict miss of a lenient pass says why
        assert (scored.strict_why is None) == (strict == "pass")


def test_the_table_is_large_enough():
    assert len(TABLE) >= 40


def test_dash_list_is_every_unicode_dash():
    dashes = {chr(c) for c in range(sys.maxunicode + 1) if unicodedata.category(chr(c)) == "Pd"} - {"-"}
    assert dashes <= set(DASHES)
    assert {normalise(c) for c in DASHES} == {"-"}
    assert normalise(ZERO_WIDTH) == ""


def test_expected_side_is_normalised_too():
    case = needle_case()
    scored = score_completion(Completion(text=VALUE, finish_reason="stop"), ("HELIX\u20131949\u2013WALRUS",))
    assert scored.outcome == scored.strict_outcome == "pass"
    assert case.expected == (VALUE,)


def test_echo_needs_the_filler_not_the_fact():
    """The same echo with the fact deep in the prompt: still an echo (filler words copied)."""
    case = needle_case(depth_zero=False)
    echo = " ".join(FILLER.split()[:12]) + f" {VALUE}"
    scored = score_completion(
        Completion(text=echo, finish_reason="stop"), case.expected, (), PromptText(case)
    )
    assert (scored.outcome, scored.strict_outcome) == ("pass", "miss")
    assert "echoes the prompt" in scored.strict_why


def test_readme_examples_follow_the_policy():
    """Every backticked answer in README's scoring table gets the verdicts the table states."""
    import re
    from pathlib import Path

    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    section = readme[readme.index("## Scoring") : readme.index("## Why a miss happened")]
    rows = re.findall(r"^\| (.+) \| (pass|miss) \| (pass|miss) \|$", section, flags=re.M)
    assert len(rows) >= 10
    checked = 0
    case = needle_case()
    for answers, lenient, strict in rows:
        for double, single in re.findall(r"`` (.+?) ``|`([^`]+)`", answers):
            answer = double or single
            scored = score_completion(
                Completion(text=answer, finish_reason="stop"),
                case.expected,
                case.distractors,
                PromptText(case),
            )
            assert (scored.outcome, scored.strict_outcome) == (lenient, strict), answer
            checked += 1
    assert checked >= 15
    assert f"The full table ({len(TABLE)} answers)" in section
