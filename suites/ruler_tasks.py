"""RULER's aggregation and tracing tasks, built offline: vt, cwe and fwe.

- vt (variable tracking): one chain of 4 hops, "VAR A = 12345", "VAR B = VAR A", ... (5-letter upper-case
  names, a 5-digit value) placed at random positions of a noise haystack (one line each); the answer is
  every name that holds the value. A one-shot example (a short chain in a short haystack, with its
  answer) comes first, as in RULER.
- cwe (common words): a numbered list where 10 words appear 30 times each and every other word 3 times
  (6 and 1 below 4096 tokens, RULER's rule); the answer is the 10 common words. One worked example first.
- fwe (frequent words): coded 6-letter words drawn with Zipf counts (alpha 2.0) from a vocabulary of
  target/50 words, the most frequent one replaced by "...." noise; the answer is the next three.

None of them has a needle depth: their cases sit at depth 0, one per (length, depth, trial) cell so the
sample count matches the niah tasks'. All are scored by string_match_all.
"""

from __future__ import annotations

import random
import string
from dataclasses import dataclass, field

from scipy.special import zeta

from recall_eval.types import Case
from suites import lexicon as lx
from suites.ruler_base import NOISE_LINE, RulerRecipe, positions

VT_HOPS = 4
CWE_COMMON, CWE_FREQ, CWE_RARE_FREQ = 10, 30, 3
CWE_SHORT = 4096  # below this target RULER uses 6 and 1 repeats
FWE_ALPHA, FWE_WORD_LEN = 2.0, 6

VT_TEMPLATE = (
    "Memorize and track the chain(s) of variable assignment hidden in the following text.\n\n{context}\n"
    "Question: Find all variables that are assigned the value {value} in the text above."
)
VT_PREFIX = (
    " Answer: According to the chain(s) of variable assignment in the text above, {count} variables "
    "are assigned the value {value}, they are: "
)
CWE_TEMPLATE = (
    "Below is a numbered list of words. Some of the words appear more often than others. "
    "Memorize the ones that appear most often.\n{context}\nQuestion: What are the {count} most common "
    "words in the list above?"
)
CWE_PREFIX = " Answer: The top {count} words that appear most often in the list are:"
FWE_TEMPLATE = (
    "Read the following coded text and track how often each coded word appears. Find the three most "
    "frequent coded words. {context}\nQuestion: Do not explain. Ignore the dots '....'. What are the "
    "three most frequent words in the coded text above?"
)
FWE_PREFIX = " Answer: According to the coded text above, the three most frequent words are:"


def _chain(rng: random.Random, letters: int) -> tuple[list[str], list[str]]:
    names: list[str] = []
    while len(names) < VT_HOPS + 1:
        name = "".join(rng.choices(string.ascii_uppercase, k=letters))
        if name not in names:
            names.append(name)
    lines = [f"VAR {names[0]} = {rng.randint(10000, 99999)}"]
    lines += [f"VAR {names[i + 1]} = VAR {names[i]}" for i in range(VT_HOPS)]
    return names, lines


def _insert_chain(units: int, lines: list[str], fractions: list[float]) -> str:
    noise = [NOISE_LINE] * units
    for shift, at in enumerate(sorted(positions(fractions, units))):
        noise.insert(at + shift, lines[shift])
    return "\n".join(noise)


@dataclass(frozen=True)
class VtRecipe(RulerRecipe):
    TOKENS_TO_GENERATE = 30
    WORDS_PER_UNIT = 18

    def render(self, filler_words: int, bare: bool = False) -> Case:
        rng = self.rng("chain")
        example_names, example_lines = _chain(rng, 3)
        example = VT_TEMPLATE.format(
            context=_insert_chain(5, example_lines, [rng.random() for _ in example_lines]),
            value=example_lines[0].split("= ")[1],
        ) + VT_PREFIX.format(count=VT_HOPS + 1, value=example_lines[0].split("= ")[1])
        example += " ".join(example_names) + "\n"
        names, lines = _chain(rng, 5)
        value = lines[0].split("= ")[1]
        context = (
            "" if bare else _insert_chain(self.units(filler_words), lines, [rng.random() for _ in lines])
        )
        content = example + VT_TEMPLATE.format(context=context, value=value)
        content += VT_PREFIX.format(count=VT_HOPS + 1, value=value)
        return self.make_case(content, names, {"hops": VT_HOPS, "chains": 1, "grid": "lengths"}, filler_words)


def _syllable_word(rng: random.Random) -> str:
    return "".join(rng.choice("bdfgklmnprstvz") + rng.choice("aeiou") for _ in range(3))


def _vocabulary(rng: random.Random, size: int) -> list[str]:
    """`size` distinct lower-case words: the project's lexicon first (shuffled), then made-up words."""
    words = sorted(
        {
            w
            for group in (lx.PEOPLE, lx.THINGS, lx.QUALITIES, lx.CHARACTER, lx.ADVERBS, lx.FEELINGS)
            for w in group
        }
        | {verb[0] for verb in lx.VERBS}
    )
    words = [w for w in words if w.isalpha()]
    rng.shuffle(words)
    seen = set(words)
    while len(words) < size:
        word = _syllable_word(rng)
        if word not in seen:
            seen.add(word)
            words.append(word)
    return words[:size]


def _numbered(words: list[str]) -> str:
    return " ".join(f"{i + 1}. {word}" for i, word in enumerate(words))


@dataclass(frozen=True)
class CweRecipe(RulerRecipe):
    TOKENS_TO_GENERATE = 120
    WORDS_PER_UNIT = 3

    def _listing(self, words: list[str], freq: int, rare: int, order: random.Random) -> str:
        listed = words[:CWE_COMMON] * freq + words[CWE_COMMON:] * rare
        order.shuffle(listed)
        return _numbered(listed)

    def render(self, filler_words: int, bare: bool = False) -> Case:
        short = self.target_tokens < CWE_SHORT
        freq, rare = (6, 1) if short else (CWE_FREQ, CWE_RARE_FREQ)
        shot_words = _vocabulary(self.rng("example"), 20 if short else 40)
        shot = self._listing(shot_words, *((3, 1) if short else (10, 3)), self.rng("example-order"))
        example = (
            CWE_TEMPLATE.format(context=shot, count=CWE_COMMON) + " " + _numbered(shot_words[:CWE_COMMON])
        )
        distinct = CWE_COMMON + self.units(filler_words) // rare
        # a prefix of one stream (so the answer is fixed), none of the worked example's words
        shown = set(shot_words)
        words = [w for w in _vocabulary(self.rng("words"), distinct + len(shown)) if w not in shown][
            :distinct
        ]
        context = "" if bare else self._listing(words, freq, rare, self.rng("order", distinct))
        content = example + "\n" + CWE_TEMPLATE.format(context=context, count=CWE_COMMON)
        content += CWE_PREFIX.format(count=CWE_COMMON)
        params = {"distinct_words": distinct, "freq_cw": freq, "freq_ucw": rare, "grid": "lengths"}
        return self.make_case(content, words[:CWE_COMMON], params, filler_words)


@dataclass(frozen=True)
class FweRecipe(RulerRecipe):
    TOKENS_TO_GENERATE = 50
    vocab: tuple[str, ...] = field(default=(), repr=False)

    def render(self, filler_words: int, bare: bool = False) -> Case:
        total = 0 if bare else max(0, filler_words)
        norm = float(zeta(FWE_ALPHA))
        counts = [int(total * (rank**-FWE_ALPHA) / norm) for rank in range(1, len(self.vocab) + 1)]
        drawn = [word for word, count in zip(self.vocab, counts, strict=True) for _ in range(count)]
        self.rng("order", total).shuffle(drawn)
        content = FWE_TEMPLATE.format(context=" ".join(drawn)) + FWE_PREFIX
        params = {"alpha": FWE_ALPHA, "vocab_size": len(self.vocab), "grid": "lengths"}
        return self.make_case(content, list(self.vocab[1:4]), params, filler_words)


def fwe_vocab(rng: random.Random, target_tokens: int) -> tuple[str, ...]:
    """target/50 distinct coded words (at least 4), the first (most frequent) being the '....' noise."""
    size = max(4, target_tokens // 50)
    vocab: list[str] = []
    seen: set[str] = set()
    while len(vocab) < size:
        word = "".join(rng.choices(string.ascii_lowercase, k=FWE_WORD_LEN))
        if word not in seen:
            seen.add(word)
            vocab.append(word)
    vocab[0] = "...."
    return tuple(vocab)
