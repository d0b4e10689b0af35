"""Calibration: pick each recipe's filler size so the whole rendered request hits its target length.

The target is met in the measuring tokenizer's tokens (the server's own where it has /v1/tokenize)
within tolerance(target) = max(8, 1% of target), or as near as the suite's filler steps allow when one
more filler unit jumps over that window (config blocks add their headers at once). The search per
recipe is a secant search on count(filler_words), kept inside a bracket (render is monotone in
filler_words) and falling back to bisection, starting from recipe.words_guess(tokens_per_word).

Determinism (resume must reproduce an uninterrupted run): the tokens-per-word ratio is learned from
the first recipe of each suite, which is always calibrated first; every other recipe starts from
that ratio, so its search path and its final filler size depend only on the recipe and the
tokenizer, not on which other cases ran before. Counts are cached by (tokenizer, case id,
filler_words, digest of the rendered messages); the cache persists in the run directory.

Short targets: when a recipe's prompt with no filler is already longer than its target, its smaller
forms (ShrinkableRecipe.smaller: fewer or terser case-made parts, same id) are tried in turn; when
even the smallest does not fit, the case comes back marked `not_applicable` (with the reason) and the
runner records it without sending it. A sweep is never refused for a length some suite cannot fill.

Per case: a case that cannot reach its target within tolerance (one more filler unit jumps over the
window, or the search does not settle in MAX_STEPS) is sent at the nearest size measured, its real
length in prompt_tokens and why in params["off_target"] (the runner flags its result off target); the
other cases keep their exact lengths.

What the server reports is checked before it is trusted: a longer filler must count more tokens.
Counts that fall as the filler grows, or stand still over FLAT_WORDS more words (a gateway's constant
usage.prompt_tokens), raise UntrustedCounts, and the caller measures
again with estimated lengths (recall_eval.api.execute says so on the console and flags the run). A
prompt the server refuses as longer than its context (tokenization.PromptRefused) is an upper bound of
the search; when no size within tolerance of the target is accepted, the case is marked `too_long`
(Case.too_long) and never sent.

Fixed recipes (a `fixed` attribute that is true: rows of a prepared file, sent as they are) are not
sized, only measured: their prompt_tokens are the server's count beside the file's own length figure.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import orjson

from recall_eval.store import write_atomically
from recall_eval.tokenization import PromptRefused, TokenCounter
from recall_eval.types import Case, CaseRecipe, ChatMessage, ShrinkableRecipe

DEFAULT_TOKENS_PER_WORD = 1.3
MAX_STEPS = 40
AIM_SHARE = 0.25  # aim within a quarter of the tolerance when one more step can get there
CACHE_FILE = "calibration-cache.json"
OFF_TARGET = "off_target"  # Case.params key: why the case could not reach its target within tolerance
# filler words that must add tokens: a flat count over this many more words is not the prompt's count
# (smaller flat steps happen: a suite may add its filler in units)
FLAT_WORDS = 32


def tolerance(target_tokens: int) -> int:
    """Allowed |prompt tokens - target|: 1% of the target, at least 8 tokens (short prompts)."""
    return max(8, int(target_tokens * 0.01))


@functools.lru_cache(maxsize=4)  # one case's messages are digested several times per step (cache keys)
def _digest(messages: tuple[ChatMessage, ...]) -> str:
    """sha256 of json.dumps([[role, content], ...], ensure_ascii=False), first 16 hex digits (the key
    stored in calibration-cache.json). The JSON is built from orjson's string encoding, which gives the
    same bytes for a string (tests/recall_eval/test_calibration_digest.py) at a fraction of the CPU:
    json.dumps of a 131K-token prompt was a quarter of calibrating it."""
    try:
        text = (
            b"["
            + b", ".join(b"[" + _json_str(m.role) + b", " + _json_str(m.content) + b"]" for m in messages)
            + b"]"
        )
    except TypeError:  # a string orjson refuses (a lone surrogate): json.dumps, as before
        text = json.dumps([[m.role, m.content] for m in messages], ensure_ascii=False).encode()
    return hashlib.sha256(text).hexdigest()[:16]


def _json_str(value: str) -> bytes:
    return orjson.dumps(value)


def recipe_id(recipe: CaseRecipe) -> str:
    """The case id a recipe renders to (independent of filler size)."""
    known = getattr(recipe, "id", None)
    return known if isinstance(known, str) else recipe.render(0).id


class CalibrationCache:
    """Token counts and needle offsets of rendered cases; in memory, persisted as JSON in a run dir."""

    def __init__(self, entries: dict[str, list[int]] | None = None):
        self.entries: dict[str, list[int]] = dict(entries or {})
        self.hits = 0
        self.misses = 0

    @classmethod
    def load(cls, run_dir: Path) -> CalibrationCache:
        path = run_dir / CACHE_FILE
        if not path.is_file():
            return cls()
        try:
            return cls(json.loads(path.read_text()))
        except ValueError:
            return cls()  # a damaged cache only costs time: start over

    def save(self, run_dir: Path) -> None:
        write_atomically(
            run_dir / CACHE_FILE, json.dumps(self.entries, separators=(",", ":")).encode("utf-8")
        )

    def get(self, key: str) -> list[int] | None:
        value = self.entries.get(key)
        if value is None:
            self.misses += 1
        else:
            self.hits += 1
        return value

    def put(self, key: str, value: list[int]) -> None:
        self.entries[key] = value


def calibrated_form(
    recipe: CaseRecipe, tokenizer_name: str | None, prompt_tokens: int | None, cache: CalibrationCache
) -> Case | None:
    """The case as calibration rendered and sent it, found again in a run's cache: the filler size whose
    count (with that tokenizer) is the stored prompt length, rendered from the recipe or a smaller form
    of it, checked against the cached messages' digest. None when the cache does not tell."""
    if tokenizer_name is None or prompt_tokens is None:
        return None
    case_id = recipe_id(recipe)
    for key, value in cache.entries.items():
        parts = key.rsplit("|", 4)
        if len(parts) != 5 or parts[4] != "count" or not value or value[0] != prompt_tokens:
            continue
        name, cached_id, words, digest, _ = parts
        if name != tokenizer_name or cached_id != case_id or not words.isdigit():
            continue
        form: CaseRecipe | None = recipe
        while form is not None:
            case = form.render(int(words))
            if _digest(case.messages) == digest:
                return case
            form = form.smaller() if isinstance(form, ShrinkableRecipe) else None
    return None


class TargetTooShort(Exception):
    """A target length below what the recipe's prompt takes with no filler at all (caught inside
    calibrate_one: a smaller form is tried, else the case is not_applicable)."""

    def __init__(self, message: str, bare_tokens: int):
        super().__init__(message)
        self.bare_tokens = bare_tokens


class UntrustedCounts(Exception):
    """The measuring tokenizer's counts do not follow the prompt: they cannot be calibrated against."""


class ContextRefusal(Exception):
    """The server refuses this case's prompt at every size near its target (too long for its context)."""


@dataclass
class _Probe:
    words: int
    tokens: int
    refused: str | None = None  # the server refused this size as longer than its context: why


class Calibrator:
    """Turns recipes into calibrated Cases with one tokenizer, using (and filling) a cache."""

    def __init__(
        self,
        tokenizer: TokenCounter,
        cache: CalibrationCache | None = None,
        concurrency: int = 8,
        keep_prompts: bool = True,
    ):
        self.tokenizer = tokenizer
        self.cache = cache if cache is not None else CalibrationCache()
        self.concurrency = concurrency
        # False: each calibrated case drops its messages (Case.without_prompt) and is rendered again when
        # sent, so a run's memory does not grow with its number of cases (a sweep's cases, not tests')
        self.keep_prompts = keep_prompts
        self.tokenize_calls = 0
        self._last_tokens: dict[str, tuple[str, list[int]]] = {}

    def _key(self, case: Case, filler_words: int, kind: str) -> str:
        return f"{self.tokenizer.name}|{case.id}|{filler_words}|{_digest(case.messages)}|{kind}"

    async def _count(self, recipe: CaseRecipe, filler_words: int) -> _Probe:
        case = recipe.render(filler_words)
        key = self._key(case, filler_words, "count")
        cached = self.cache.get(key)
        if cached is None:
            self.tokenize_calls += 1
            try:
                tokens = await self.tokenizer.tokenize_messages(case.messages)
            except PromptRefused as refused:
                return _Probe(filler_words, -1, refused=str(refused))
            # the latest probe's tokens, kept for measuring the needle offset without tokenizing again
            self._last_tokens[case.id] = (_digest(case.messages), tokens)
            cached = [len(tokens)]
            self.cache.put(key, cached)
        return _Probe(filler_words, cached[0])

    async def search(self, recipe: CaseRecipe, tokens_per_word: float) -> tuple[int, float, str | None]:
        """filler_words whose prompt is within tolerance of the target, the last slope seen, and None;
        or, where no size lands within tolerance, the nearest size and why (the case is sent at that
        length, marked off target: the other cases keep their exact lengths).

        Within tolerance but farther than AIM_SHARE of it from the target, one more secant step is
        taken and the closer of the two is kept (so lengths do not all sit at the window's edge).
        """
        target, allowed = recipe.target_tokens, tolerance(recipe.target_tokens)
        aim = max(2, int(allowed * AIM_SHARE))
        low: _Probe | None = None  # largest probe below the target
        high: _Probe | None = None  # smallest probe above the target
        best: _Probe | None = None  # closest probe within tolerance
        refined = False
        slope = tokens_per_word
        previous: _Probe | None = None
        nearest: _Probe | None = None  # closest measured probe, within tolerance or not
        words: int | None = recipe.words_guess(tokens_per_word)
        for _ in range(MAX_STEPS):
            assert words is not None
            probe = await self._count(recipe, words)
            if probe.refused is not None:  # too long for the server: an upper bound, length unknown
                if high is None or probe.words < high.words:
                    high = probe
                words = self._below_refusal(probe, low)
                if words is None:
                    if best is not None:
                        return best.words, slope, None
                    raise ContextRefusal(probe.refused)
                continue
            if previous is not None and probe.words != previous.words:
                measured = (probe.tokens - previous.tokens) / (probe.words - previous.words)
                if measured < 0 or (measured == 0 and abs(probe.words - previous.words) >= FLAT_WORDS):
                    # more filler, fewer tokens (or none more over many words): not this prompt's counts
                    raise UntrustedCounts(
                        f"{self.tokenizer.name} counted {previous.tokens} tokens with {previous.words} filler "
                        f"words and {probe.tokens} with {probe.words}"
                    )
                if measured > 0:
                    slope = measured
            error = probe.tokens - target
            if nearest is None or abs(error) < abs(nearest.tokens - target):
                nearest = probe
            if abs(error) <= allowed and (best is None or abs(error) < abs(best.tokens - target)):
                best = probe
            if best is not None and (refined or abs(best.tokens - target) <= aim):
                return best.words, slope, None
            refined = best is not None
            if error < 0:
                low = probe if low is None or probe.words > low.words else low
            elif error > 0:
                if probe.words == 0 and error > allowed:
                    raise TargetTooShort(
                        f"{target} tokens is shorter than this {recipe.suite} prompt with no filler "
                        f"({probe.tokens} tokens)",
                        probe.tokens,
                    )
                high = probe if high is None or probe.words < high.words else high
            previous = probe
            words = self._next_words(probe, target, slope, low, high)
            if words is None:  # no filler size left between the bracket's ends
                # one more filler unit jumps over the whole window (a config block's headers, say):
                # the nearer side is the closest this recipe can get; its prompt_tokens say so
                if best is None and high is not None and high.refused is not None:
                    raise ContextRefusal(high.refused)
                if best is not None:
                    return best.words, slope, None
                sides = [p for p in (low, high) if p is not None and p.refused is None]
                closest = min(sides, key=lambda p: abs(p.tokens - target))
                why = (
                    f"one more filler unit ({recipe.suite} grows by whole turns, entries or exchanges) moves "
                    f"the prompt from {low.tokens} to {high.tokens} tokens, past {target}±{allowed}"
                    if low is not None and high is not None and high.refused is None
                    else f"no filler size lands within {target}±{allowed}"
                )
                return closest.words, slope, f"{why}: sent at {closest.tokens} tokens, the nearest size"
        if best is not None:
            return best.words, slope, None
        if nearest is None:  # every size tried was refused as longer than the context
            raise ContextRefusal(high.refused if high is not None and high.refused else "refused")
        return (
            nearest.words,
            slope,
            f"{self.tokenizer.name} counts did not settle within {target}±{allowed} tokens in {MAX_STEPS} "
            f"steps: sent at {nearest.tokens} tokens, the nearest size measured",
        )

    @staticmethod
    def _below_refusal(refused: _Probe, low: _Probe | None) -> int | None:
        """The next size to try under a refused one: halfway down to the largest size below the
        target (or to none); None when no size is left in between."""
        floor = low.words if low is not None else -1
        if refused.words - floor <= 1:
            return None
        return (floor + refused.words) // 2

    @staticmethod
    def _next_words(
        probe: _Probe, target: int, slope: float, low: _Probe | None, high: _Probe | None
    ) -> int | None:
        """A secant step, kept strictly inside the bracket (low, high); bisection when it leaves it."""
        guess = round(probe.words + (target - probe.tokens) / slope)
        floor = low.words if low is not None else -1
        if high is None:
            return max(floor + 1, guess)
        if high.words - floor <= 1:
            return None
        if floor < 0:
            return max(0, min(guess, high.words - 1))
        if floor < guess < high.words:
            return guess
        return (floor + high.words) // 2

    async def _needle_offsets(self, case: Case) -> tuple[int | None, int | None]:
        """Token offsets of the fact: the first token that differs when the prompt stops before it."""
        span = case.needle
        if span is None:
            return None, None
        key = self._key(case, int(case.params.get("filler_words", -1)), "needle")
        cached = self.cache.get(key)
        if cached is not None:
            return cached[0], cached[1]
        digest, full = self._last_tokens.pop(case.id, ("", []))
        if digest != _digest(case.messages):
            self.tokenize_calls += 1
            full = await self.tokenizer.tokenize_messages(case.messages)
        message = case.messages[span.message_index]
        prefixes = [
            case.messages[: span.message_index]
            + (ChatMessage(role=message.role, content=message.content[:cut]),)
            for cut in (span.char_start, span.char_end)
        ]
        self.tokenize_calls += len(prefixes)
        measured = await asyncio.gather(*(self.tokenizer.tokenize_messages(prefix) for prefix in prefixes))
        offsets = [_common_prefix(full, tokens) for tokens in measured]
        start, end = offsets[0], max(offsets[1], offsets[0] + 1)
        self.cache.put(key, [start, end])
        return start, end

    async def calibrate_one(self, recipe: CaseRecipe, tokens_per_word: float) -> tuple[Case, float]:
        """The calibrated case and the slope seen; the first smaller form that fits when the recipe
        does not, else the smallest form marked not_applicable."""
        try:
            # a recipe with no filler to size (a prepared file's row: sent as it is) is only measured
            words, slope, off_target = (
                (0, tokens_per_word, None)
                if getattr(recipe, "fixed", False)
                else (await self.search(recipe, tokens_per_word))
            )
        except TargetTooShort as short:
            smaller = recipe.smaller() if isinstance(recipe, ShrinkableRecipe) else None
            if smaller is not None:
                return await self.calibrate_one(smaller, tokens_per_word)
            return self._not_applicable(recipe, short.bare_tokens), tokens_per_word
        except ContextRefusal as refusal:
            case = recipe.render(recipe.words_guess(tokens_per_word))
            reason = (
                f"the server refused a {recipe.target_tokens}-token prompt as longer than its context "
                f"({refusal}); not sent"
            )
            refused = case.model_copy(update={"tokenizer": self.tokenizer.name, "too_long": reason})
            return self._kept(refused, recipe, recipe.words_guess(tokens_per_word)), tokens_per_word
        case = recipe.render(words)
        measured = await self._count(recipe, words)
        if measured.refused is not None:  # a fixed prompt (sent as it is) the server will not take
            reason = (
                f"the server refused this prompt as longer than its context ({measured.refused}); not sent"
            )
            refused = case.model_copy(update={"tokenizer": self.tokenizer.name, "too_long": reason})
            return self._kept(refused, recipe, words), slope
        prompt_tokens = measured.tokens
        start, end = await self._needle_offsets(case)
        self._last_tokens.pop(case.id, None)
        if off_target is not None:  # its real length is prompt_tokens; the result is flagged off target
            case = case.model_copy(update={"params": {**case.params, OFF_TARGET: off_target}})
        calibrated = case.model_copy(
            update={
                "prompt_tokens": prompt_tokens,
                "needle_token_offset": start,
                "needle_token_end": end,
                "tokenizer": self.tokenizer.name,
            }
        )
        return self._kept(calibrated, recipe, words), slope

    def _kept(self, case: Case, form: CaseRecipe, filler_words: int) -> Case:
        """The case as the caller keeps it: whole, or without its prompt (rendered again when sent)."""
        return case if self.keep_prompts else case.without_prompt(form, filler_words)

    def _not_applicable(self, recipe: CaseRecipe, bare_tokens: int) -> Case:
        case = recipe.render(0)
        form = ", ".join(f"{k} {case.params[k]}" for k in ("variant", "format", "layout") if k in case.params)
        reason = (
            f"does not fit: the smallest {recipe.suite} prompt for this cell{f' ({form})' if form else ''} "
            f"takes {bare_tokens} "
            f"tokens with no filler, over the {recipe.target_tokens}-token target "
            f"(±{tolerance(recipe.target_tokens)}); not sent"
        )
        marked = case.model_copy(
            update={"prompt_tokens": bare_tokens, "tokenizer": self.tokenizer.name, "not_applicable": reason}
        )
        return self._kept(marked, recipe, 0)

    async def calibrate(
        self,
        recipes: Sequence[CaseRecipe],
        only: set[str] | None = None,
        on_done: Callable[[Case], None] | None = None,
    ) -> list[Case]:
        """Calibrated cases for `recipes` (order kept), or only for the case ids in `only`.

        The first recipe of each suite is calibrated first, alone, even when not in `only` (it sets
        the suite's tokens-per-word ratio); the rest run concurrently from that ratio.
        """
        if only is not None and not only:
            return []
        return await self._calibrate(recipes, only, on_done)

    async def _calibrate(
        self,
        recipes: Sequence[CaseRecipe],
        only: set[str] | None,
        on_done: Callable[[Case], None] | None,
    ) -> list[Case]:
        ratios: dict[str, float] = {}
        results: list[Case | None] = [None] * len(recipes)
        wanted = [only is None or recipe_id(recipe) in only for recipe in recipes]
        for index, recipe in enumerate(recipes):
            if recipe.suite not in ratios:
                case, slope = await self.calibrate_one(recipe, DEFAULT_TOKENS_PER_WORD)
                ratios[recipe.suite] = slope
                if wanted[index]:
                    results[index] = case
                    if on_done is not None:
                        on_done(case)
        gate = asyncio.Semaphore(self.concurrency)

        async def one(index: int, recipe: CaseRecipe) -> None:
            async with gate:
                case, _ = await self.calibrate_one(recipe, ratios[recipe.suite])
            results[index] = case
            if on_done is not None:
                on_done(case)

        try:  # a failure (untrusted counts, a server that stopped answering) cancels the others
            async with asyncio.TaskGroup() as group:
                for i, r in enumerate(recipes):
                    if wanted[i] and results[i] is None and r.suite in ratios:
                        group.create_task(one(i, r))
        except BaseExceptionGroup as failed:
            raise _first_leaf(failed) from None
        return [case for case in results if case is not None]


def _first_leaf(group: BaseExceptionGroup) -> BaseException:
    first = group.exceptions[0]
    return _first_leaf(first) if isinstance(first, BaseExceptionGroup) else first


def _common_prefix(first: list[int], second: list[int]) -> int:
    """Length of the longest common prefix: a bisection on slice equality (compared in C; a Python
    loop over a 1M-token prompt took ~0.15 s)."""
    low, high = 0, min(len(first), len(second))  # first[:low] == second[:low]; the answer is <= high
    while low < high:
        middle = (low + high + 1) // 2
        if first[low:middle] == second[low:middle]:
            low = middle
        else:
            high = middle - 1
    return low
