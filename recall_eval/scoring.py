"""Scoring: a case and a live model's completion -> an Outcome (DESIGN.md's taxonomy).

Rules, in order, for an answer from a live model (the answer is the completion's content with any
<think>...</think> removed; reasoning text is never scored):

1. hedge on a distractor: the answer contains (case-insensitively) any of the case's distractors
   -> ``miss``, even when the expected value is there too.
2. pass: the answer contains (case-insensitively, as a substring) one of the case's expected values,
   and it lists fewer than HEDGE_LIMIT (2) *other* code-shaped strings -> ``pass``.
   Listing two or more other code-shaped strings next to the value is a guess list -> ``miss``.
3. truncated: no pass, and the server stopped because of the answer budget (finish_reason
   ``length``) -> ``truncated``; a blank answer whose budget went to reasoning gets the detail
   REASONING_RAN_OUT ("budget ran out while reasoning").
4. empty: no pass and the answer is blank (only whitespace) -> ``empty``.
5. otherwise -> ``miss``.

A *code-shaped string* is a maximal run of ASCII letters, digits, ``-`` and ``_`` (leading and
trailing ``-``/``_`` stripped) that is at least CODE_MIN_LEN (5) characters long and contains at
least one digit and at least one letter or separator: ``ZEBRA-4492-OMEGA``, ``A7F3Q``, ``4492-1187``
are code-shaped; ``OMEGA``, ``12345``, ``hello`` are not. A code-shaped string is *other* when,
compared case-insensitively, it neither equals, contains nor is contained in an expected value.

Infrastructure outcomes (too_long, oom, crash, timeout, error) are never produced here from an
answer; they come from the runner and are never counted toward recall (recall_eval.types.RECALL_OUTCOMES; the frame's `counted` column).
"""

from __future__ import annotations

import re

from recall_eval.types import Completion, Outcome

CODE_MIN_LEN = 5
HEDGE_LIMIT = 2
_CODE_RUN = re.compile(r"[A-Za-z0-9_-]+")
_DIGIT = re.compile(r"[0-9]")
_LETTER_OR_SEPARATOR = re.compile(r"[A-Za-z_-]")


def code_shaped_strings(text: str) -> list[str]:
    """Every code-shaped string in text, in order of appearance (see the module docstring)."""
    found = []
    for match in _CODE_RUN.finditer(text):
        run = match.group().strip("-_")
        if len(run) >= CODE_MIN_LEN and _DIGIT.search(run) and _LETTER_OR_SEPARATOR.search(run):
            found.append(run)
    return found


def other_codes(answer: str, expected: tuple[str, ...]) -> set[str]:
    """Distinct code-shaped strings in the answer that are not (part of) an expected value."""
    wanted = [value.lower() for value in expected if value]
    others = set()
    for code in code_shaped_strings(answer):
        lowered = code.lower()
        if not any(lowered == value or lowered in value or value in lowered for value in wanted):
            others.add(lowered)
    return others


def score_answer(
    answer: str,
    expected: tuple[str, ...],
    distractors: tuple[str, ...] = (),
    finish_reason: str | None = None,
) -> tuple[Outcome, str | None]:
    """The outcome of one live answer, and a short reason when it is not a pass."""
    lowered = answer.lower()
    hedged_on = [value for value in distractors if value and value.lower() in lowered]
    if hedged_on:
        return "miss", f"answer contains distractor {hedged_on[0]!r}"
    if any(value and value.lower() in lowered for value in expected):
        others = other_codes(answer, expected)
        if len(others) < HEDGE_LIMIT:
            return "pass", None
        return "miss", f"answer lists {len(others)} other code-shaped strings besides the value"
    if finish_reason == "length":
        return "truncated", "answer budget (max_tokens) ran out before the value appeared"
    if not answer.strip():
        return "empty", "blank answer"
    return "miss", None


REASONING_RAN_OUT = "budget ran out while reasoning"


def score_completion(
    completion: Completion, expected: tuple[str, ...], distractors: tuple[str, ...] = ()
) -> tuple[Outcome, str | None]:
    """score_answer on the completion; a budget spent entirely on reasoning (the server separated it,
    or an unclosed <think>) is `truncated` with its own detail, never a plain miss."""
    outcome, why = score_answer(completion.text, expected, distractors, completion.finish_reason)
    if outcome == "truncated" and not completion.text.strip() and completion.reasoning.strip():
        tokens = f"{completion.completion_tokens} tokens" if completion.completion_tokens else "the budget"
        why = f"{REASONING_RAN_OUT} ({tokens}, no answer yet); raise --max-tokens for thinking runs"
    return outcome, why
