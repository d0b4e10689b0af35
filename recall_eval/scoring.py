"""Scoring: a case and a live model's completion -> two verdicts, lenient and strict (README, "Scoring").

Both sides are normalised first (`normalise`): Unicode NFKC; every dash, hyphen and minus sign
(U+2010..U+2015, U+2212, U+FE58, U+FF0D, ...) becomes ``-``; zero-width characters and the soft
hyphen are removed; no-break spaces read as spaces. An expected value then *appears* in an answer when
it does so case-insensitively with any spacing around its separators: ``HELIX - 1949 - WALRUS`` and
``HELIX 1949 WALRUS`` are both ``HELIX-1949-WALRUS``.

Lenient verdict (RULER-compatible, the headline by default), for an answer from a live model (the
completion's content with any <think>...</think> removed; reasoning text is never scored):

1. the answer names one of the case's distractors -> ``miss``, even when the expected value is there too.
2. an expected value appears (as a substring, RULER's rule) and the answer lists fewer than HEDGE_LIMIT
   (2) *other* code-shaped strings -> ``pass``; two or more is a guess list -> ``miss``.
3. no pass and the server stopped because of the answer budget (finish_reason ``length``) ->
   ``truncated``; a blank answer whose budget went to reasoning gets the detail REASONING_RAN_OUT.
4. no pass and the answer is blank -> ``empty``.
5. otherwise -> ``miss``.

Strict verdict: a lenient pass stays a pass only when the answer commits to the expected value: the
first value-shaped string of the answer is the expected value (standing alone, not part of a longer
code), the answer names no other value after it (a correction, a second guess), and it does not echo the
prompt (ECHO_WORDS consecutive words copied from the prompt outside the fact's sentence and the
question). Every other lenient outcome is also the strict one, so strict never passes what lenient fails.

A *code-shaped string* is a maximal run of ASCII letters, digits, ``-`` and ``_`` (leading and
trailing ``-``/``_`` stripped) that is at least CODE_MIN_LEN (5) characters long and contains at
least one digit and at least one letter or separator: ``ZEBRA-4492-OMEGA``, ``A7F3Q``, ``4492-1187``
are code-shaped; ``OMEGA``, ``12345``, ``hello`` are not. A *value-shaped string* is a code-shaped
string or an appearance of an expected value or distractor. Code-shaped strings that the question
itself contains (a key name) are not values of the answer.

Infrastructure outcomes (too_long, oom, crash, timeout, error) are never produced here from an
answer; they come from the runner and are never counted toward recall (recall_eval.types.RECALL_OUTCOMES; the frame's `counted` column).
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from functools import cached_property, lru_cache
from typing import TYPE_CHECKING

from recall_eval.types import RECALL_OUTCOMES, Case, Completion, Outcome

if TYPE_CHECKING:  # the frame-reading helper below needs no pandas import of its own
    import pandas as pd

CODE_MIN_LEN = 5
HEDGE_LIMIT = 2
ECHO_WORDS = 8  # this many consecutive prompt words (outside the fact and the question) is an echo
_CODE_RUN = re.compile(r"[A-Za-z0-9_-]+")
_DIGIT = re.compile(r"[0-9]")
_LETTER_OR_SEPARATOR = re.compile(r"[A-Za-z_-]")
_WORD = re.compile(r"[a-z0-9]+")

# Unicode's dash punctuation (category Pd; tests/recall_eval/test_scoring.py checks the list is whole)
# plus the minus sign and the hyphen bullet: all read as "-".
DASHES = (
    "\u058a\u05be\u1400\u1806\u2010\u2011\u2012\u2013\u2014\u2015\u2e17\u2e1a\u2e3a\u2e3b\u2e40\u2e5d"
    "\u301c\u3030\u30a0\ufe31\ufe32\ufe58\ufe63\uff0d\U00010ead\u2212\u2043"
)
ZERO_WIDTH = "\u200b\u200c\u200d\u2060\ufeff\u00ad\u180e"
_TRANSLATE = {**{ord(c): "-" for c in DASHES}, **{ord(c): None for c in ZERO_WIDTH}}


def normalise(text: str) -> str:
    """NFKC (no-break and other wide spaces become spaces, full-width letters plain), every dash "-",
    zero-width characters removed. Applied to answers and expected values alike."""
    return unicodedata.normalize("NFKC", text.translate(_TRANSLATE)).translate(_TRANSLATE)


@lru_cache(maxsize=4096)
def _value_patterns(value: str) -> tuple[re.Pattern[str], re.Pattern[str]]:
    """(anywhere, standing alone) patterns of a normalised value: case-insensitive, separators with
    any spacing around them, a "-" also written as spaces."""
    parts = re.split(r"([\s_-]+)", normalise(value).strip())
    body = []
    for part in parts:
        if not part:
            continue
        if re.fullmatch(r"[\s_-]+", part):
            if "_" in part:
                body.append(r"\s*_\s*")
            elif "-" in part:
                body.append(r"(?:\s*-\s*|\s+)")
            else:
                body.append(r"\s+")
        else:
            body.append(re.escape(part))
    core = "".join(body)
    alone = rf"(?<![a-z0-9])(?<![a-z0-9][-_]){core}(?![a-z0-9])(?![-_][a-z0-9])"
    return re.compile(core, re.IGNORECASE), re.compile(alone, re.IGNORECASE)


def appears(value: str, text: str) -> bool:
    """The normalised value appears in the (already normalised) text, spacing around separators free."""
    return bool(value.strip()) and _value_patterns(value)[0].search(text) is not None


def code_shaped_strings(text: str) -> list[str]:
    """Every code-shaped string in text, in order of appearance (see the module docstring)."""
    return [run for _, run in _code_spans(text)]


def _code_spans(text: str) -> list[tuple[int, str]]:
    found = []
    for match in _CODE_RUN.finditer(text):
        run = match.group().strip("-_")
        if len(run) >= CODE_MIN_LEN and _DIGIT.search(run) and _LETTER_OR_SEPARATOR.search(run):
            found.append((match.start() + match.group().index(run), run))
    return found


def other_codes(answer: str, expected: tuple[str, ...]) -> set[str]:
    """Distinct code-shaped strings in the answer that are not (part of) an expected value."""
    wanted = [normalise(value).lower() for value in expected if value]
    others = set()
    for code in code_shaped_strings(normalise(answer)):
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
    """The lenient outcome of one live answer, and a short reason when it is not a pass."""
    text = normalise(answer)
    hedged_on = [value for value in distractors if appears(value, text)]
    if hedged_on:
        return "miss", f"answer contains distractor {hedged_on[0]!r}"
    if any(appears(value, text) for value in expected):
        others = other_codes(text, expected)
        if len(others) < HEDGE_LIMIT:
            return "pass", None
        return "miss", f"answer lists {len(others)} other code-shaped strings besides the value"
    if finish_reason == "length":
        return "truncated", "answer budget (max_tokens) ran out before the value appeared"
    if not text.strip():
        return "empty", "blank answer"
    return "miss", None


class PromptText:
    """What the strict verdict needs of a case's prompt: its words outside the fact's sentence and the
    question (for echoes; worked out only for an answer long enough to echo), and the question (whose
    code-shaped strings are not values of the answer)."""

    def __init__(self, case: Case):
        self.case = case
        users = [i for i, m in enumerate(case.messages) if m.role == "user"]
        self._last_user = users[-1] if users else None
        content = case.messages[self._last_user].content if users else ""
        self._cut = content.rfind("\n\n")
        self.question = normalise(content[self._cut + 2 :] if self._cut >= 0 else content)

    @cached_property
    def haystack_words(self) -> str:
        """ " w1 w2 ... ": the prompt's words, lowercased, without the fact's sentence and the question."""
        case, parts = self.case, []
        for index, message in enumerate(case.messages):
            content = message.content
            if index == self._last_user:
                content = content[: self._cut] if self._cut >= 0 else ""
            if case.needle is not None and index == case.needle.message_index:
                before = case.needle.char_start
                start = max(content.rfind(".", 0, before), content.rfind("\n", 0, before))
                stops = [
                    p
                    for p in (
                        content.find(". ", case.needle.char_end),
                        content.find("\n", case.needle.char_end),
                    )
                    if p >= 0
                ]
                end = min(stops) if stops else len(content)
                content = content[: start + 1] + "\n" + content[end + 1 :]
            parts.append(content)
        return f" {' '.join(_WORD.findall(normalise(chr(10).join(parts)).lower()))} "

    def echoed_in(self, answer: str) -> str | None:
        """The first ECHO_WORDS-word run of the (normalised) answer copied from the prompt, or None."""
        words = _WORD.findall(answer.lower())
        for i in range(len(words) - ECHO_WORDS + 1):
            run = " ".join(words[i : i + ECHO_WORDS])
            if f" {run} " in self.haystack_words:
                return run
        return None


def strict_check(
    answer: str,
    expected: tuple[str, ...],
    distractors: tuple[str, ...] = (),
    prompt: PromptText | None = None,
) -> str | None:
    """None when the answer commits to the expected value (the strict rule), else why it does not."""
    text = normalise(answer)
    if prompt is not None and (echo := prompt.echoed_in(text)) is not None:
        return f"answer echoes the prompt ({echo!r})"
    masked = list(text)
    found: list[tuple[int, str, str]] = []  # (position, kind, text)

    def mark(match: re.Match[str], kind: str) -> None:
        if any(c == "\0" for c in masked[match.start() : match.end()]):
            return
        found.append((match.start(), kind, match.group()))
        masked[match.start() : match.end()] = "\0" * (match.end() - match.start())

    for value in expected:
        if value.strip():
            for match in _value_patterns(value)[1].finditer(text):
                mark(match, "expected")
    for value in distractors:
        if value.strip():
            for match in _value_patterns(value)[0].finditer(text):
                mark(match, "other")
    for value in expected:  # the value glued into a longer code: another value
        if value.strip():
            for match in _value_patterns(value)[0].finditer(text):
                mark(match, "other")
    question_codes = {code.lower() for code in code_shaped_strings(prompt.question)} if prompt else set()
    for start, code in _code_spans("".join(masked).replace("\0", " ")):
        if code.lower() not in question_codes:
            found.append((start, "other", code))
    found.sort()
    if not found:
        return "no value in the answer"
    if found[0][1] != "expected":
        return f"the first value in the answer is {found[0][2]!r}"
    later = [value for _, kind, value in found if kind != "expected"]
    if later:
        return f"the answer also names {later[0]!r}"
    return None


REASONING_RAN_OUT = "budget ran out while reasoning"


@dataclass(frozen=True)
class Scored:
    """Both verdicts of one answer, with why each is not a pass (None for a pass)."""

    outcome: Outcome  # lenient: Result.outcome
    why: str | None
    strict_outcome: Outcome  # Result.strict_outcome
    strict_why: str | None


def score_completion(
    completion: Completion,
    expected: tuple[str, ...],
    distractors: tuple[str, ...] = (),
    prompt: PromptText | None = None,
) -> Scored:
    """Both verdicts of the completion; a budget spent entirely on reasoning (the server separated it,
    or an unclosed <think>) is `truncated` with its own detail, never a plain miss."""
    outcome, why = score_answer(completion.text, expected, distractors, completion.finish_reason)
    if outcome == "truncated" and not completion.text.strip() and completion.reasoning.strip():
        tokens = f"{completion.completion_tokens} tokens" if completion.completion_tokens else "the budget"
        why = f"{REASONING_RAN_OUT} ({tokens}, no answer yet); raise --max-tokens for thinking runs"
    if outcome != "pass":
        return Scored(outcome, why, outcome, why)
    strict_why = strict_check(completion.text, expected, distractors, prompt)
    return Scored(outcome, why, "miss" if strict_why else "pass", strict_why)


def cut_in_reasoning(completion: Completion | None) -> bool:
    """The budget ran out inside the reasoning: no answer text, finish_reason length, reasoning there."""
    return (
        completion is not None
        and completion.finish_reason == "length"
        and not completion.text.strip()
        and bool(completion.reasoning.strip())
    )


def budget_eaten_by_reasoning(frame: pd.DataFrame) -> bool:
    """Every answer from a live model (a results frame, recall_eval.frame) was cut inside its reasoning,
    and there was at least one: the answer budget, not the model's recall, is what failed; the console,
    the report and the exit code say so instead of "recall 0%"."""
    if frame.empty:
        return False
    answered = frame[frame["outcome"].isin(RECALL_OUTCOMES)]
    return bool(len(answered)) and bool(
        (
            (answered["outcome"] == "truncated")
            & answered["error"].fillna("").str.startswith(REASONING_RAN_OUT)
        ).all()
    )
