"""Seeded filler prose: an infinite, deterministic stream of plain English words.

`FillerText(seed).words(n)` is exactly the first n words of the stream, so words(n) is a
prefix of words(n + 1) and longer filler never gives a shorter text. The stream is
grown lazily and kept, so rendering the same haystack at several sizes costs one join.
The stream is also kept joined (one string, each word's end offset in it), so a span of the
stream, at any size, is one slice of that string: a 1M-token haystack renders in milliseconds.
The prose never contains digits, upper-case codes or needle vocabulary (see lexicon.py).
"""

from __future__ import annotations

import bisect
import random
import string
import threading
from array import array
from itertools import accumulate

from suites import lexicon as lx
from suites.seeding import derive_rng

PARAGRAPH_BREAK = "\n\n"
_VOWEL_SOUND = tuple("aeiou") + ("honest",)
_TERMINAL = (".", "?", "!", '."', '?"', '!"')
_GIVE = ("gave", "showed", "sent", "handed", "sold", "lent", "brought", "offered")
_WEATHER = ("quiet", "cold", "warm", "calm", "bright", "grey", "damp", "peaceful", "windy", "still")
_OPENERS = ("Later", "Meanwhile", "Afterwards", "Even so", "As usual", "By then", "Once again", "In the end")

# Slots: S/S2 subjects, O/O2 objects, Oa object with "a", N person noun, J adjective,
# Vb/Vp/Vs/Vn verb base/past/present/participle, Mb/Mp/Ms motion base/past/present,
# P place, T time, A adverb, F feeling, X topic, G giving verb, W weather word, C opener.
TEMPLATES: tuple[str, ...] = (
    "{T}, {S} {Vp} {O} {P}.",
    "{S} {Vp} {O} and then {Mp} {P}.",
    "{S} {A} {Vp} {O}.",
    "{S} was {F} to see that {S2} had {Vn} {O}.",
    "Every day {P}, {S} {Vs} {O}.",
    "Nobody knew why {S} wanted to {Vb} {O} {T}.",
    "{S} and {S2} {Mp} {P} {T}.",
    "{S} often spoke about {X}.",
    "{T}, {S} {Mp} {A} {P}, thinking about {X}.",
    "It was {W} {P} {T}.",
    "When {S} {Vp} {O}, {S2} {Mp} {P}.",
    '"Have you seen {O}?" asked {S}.',
    '"I will {Vb} {O} tomorrow," said {S}.',
    "{S} kept {O} {P} for many years.",
    "Some people said that {S} {Vs} {O} better than anyone {P}.",
    "There was {Oa} {P}, and {S} {Vp} it {A}.",
    "{S} did not {Vb} {O}, because {S2} had already {Vn} it.",
    "{C}, {S} {G} {O} to {S2}.",
    "{S} {Mp} {P} until {S2} arrived.",
    "Usually {S} {Ms} {P} {A}.",
    "{S} seemed {F} about {X}.",
    "Perhaps {S} will {Vb} {O} {P} tomorrow.",
    "The {N} who lived {P} {Vp} {O} {A}.",
    "{S} looked at {O} and felt {F}.",
    "Nobody could say whether {S} had {Vn} {O}.",
    "{S} {Vs} {O} whenever {S2} {Ms} {P}.",
    "{C}, the talk {P} turned to {X}.",
    "{S} liked to {Mb} {P} {T}.",
    "{T}, {S} and {S2} argued about {X}.",
    "{S} {Vp} {O}, {Vp2} {O2}, and went home {A}.",
    "Everyone {P} knew {S}, who {Vs} {O} {A}.",
    "{S} was {F}, so {S2} {Vp} {O} {A}.",
)
_SLOTS: tuple[frozenset[str], ...] = tuple(
    frozenset(name for _, name, _, _ in string.Formatter().parse(t) if name) for t in TEMPLATES
)
_SORTED_SLOTS = tuple(tuple(sorted(slots)) for slots in _SLOTS)  # the order the slots draw from the rng


def _article(word: str) -> str:
    return "an" if word.startswith(_VOWEL_SOUND) else "a"


def _subject(rng: random.Random) -> str:
    noun = rng.choice(lx.PEOPLE)
    shape = rng.random()
    if shape < 0.45:
        return f"the {rng.choice(lx.CHARACTER)} {noun}"
    if shape < 0.8:
        return f"the {noun}"
    if shape < 0.9:
        adjective = rng.choice(lx.CHARACTER)
        return f"{_article(adjective)} {adjective} {noun}"
    return f"the {rng.choice(lx.PEOPLE)}'s {noun}"


def _object(rng: random.Random) -> str:
    thing = rng.choice(lx.THINGS)
    shape = rng.random()
    if shape < 0.4:
        return f"the {rng.choice(lx.QUALITIES)} {thing}"
    if shape < 0.7:
        return f"the {thing}"
    if shape < 0.85:
        return f"the {rng.choice(lx.PEOPLE)}'s {thing}"
    return f"{_article(thing)} {thing}"


def _fill(slot: str, rng: random.Random) -> str:
    kind = slot.rstrip("2")
    if kind == "S":
        return _subject(rng)
    if kind == "O":
        return _object(rng)
    if kind == "Oa":
        adjective = rng.choice(lx.QUALITIES)
        return f"{_article(adjective)} {adjective} {rng.choice(lx.THINGS)}"
    if kind in ("Vb", "Vp", "Vs", "Vn"):
        return rng.choice(lx.VERBS)[("Vb", "Vp", "Vs", "Vn").index(kind)]
    if kind in ("Mb", "Mp", "Ms"):
        return rng.choice(lx.MOTIONS)[("Mb", "Mp", "Ms").index(kind)]
    return rng.choice(_POOLS[kind])


_POOLS = {
    "N": lx.PEOPLE,
    "J": lx.CHARACTER,
    "P": lx.PLACES,
    "T": lx.TIMES,
    "A": lx.ADVERBS,
    "F": lx.FEELINGS,
    "X": lx.TOPICS,
    "G": _GIVE,
    "W": _WEATHER,
    "C": _OPENERS,
}


def make_sentence(rng: random.Random) -> str:
    """One sentence from a random template, capitalised and ending in terminal punctuation."""
    index = rng.randrange(len(TEMPLATES))
    values = {slot: _fill(slot, rng) for slot in _SORTED_SLOTS[index]}
    text = TEMPLATES[index].format(**values)
    if text.startswith('"'):
        return '"' + text[1].upper() + text[2:]
    return text[0].upper() + text[1:]


class FillerText:
    """The word stream of one seed. Safe to share between recipes and threads."""

    def __init__(self, seed: int | str):
        self.seed = seed
        self._rng = derive_rng("filler", seed)
        # the stream is kept only as its joined text and offsets (no per-word string objects: a run keeps
        # one stream per seed and trial, for rendering each prompt again when it is sent)
        self._starts: list[int] = []  # word index of each sentence's first word
        self._breaks: set[int] = set()  # word indices preceded by PARAGRAPH_BREAK (the others by a space)
        self._left_in_paragraph = 0
        self._text = ""  # separator + word for every word so far (the first separator included)
        self._ends = array("q")  # offset in _text where each word ends
        self._lock = threading.Lock()

    def _grow(self, n: int) -> None:
        with self._lock:
            count = len(self._ends)
            pieces: list[str] = []  # separator + word of each new word
            while count < n:
                sep = " "
                if self._left_in_paragraph == 0:
                    self._left_in_paragraph = self._rng.randint(3, 7)
                    sep = PARAGRAPH_BREAK
                    self._breaks.add(count)
                self._left_in_paragraph -= 1
                sentence = make_sentence(self._rng).split()
                self._starts.append(count)
                pieces.append(sep + sentence[0])
                pieces.extend(" " + word for word in sentence[1:])
                count += len(sentence)
            if pieces:
                joined = len(self._ends)
                self._ends.extend(accumulate(map(len, pieces), initial=len(self._text)))
                self._ends.pop(joined)  # the initial offset: where the first new piece starts
                self._text += "".join(pieces)

    def words(self, n: int) -> str:
        """Exactly the first n words (a prefix of words(n + 1))."""
        return self.span(0, n)

    def span(self, start: int, stop: int) -> str:
        """Words [start, stop) joined with their separators; no separator before the first."""
        if stop <= start:
            return ""
        self._grow(stop)
        first = (self._ends[start - 1] if start else 0) + len(self._separator(start))
        return self._text[first : self._ends[stop - 1]]

    def closed_span(self, start: int, stop: int) -> str:
        """span(start, stop), with the sentence cut at `stop` closed by a full stop.

        Monotone like span: the text for stop + 1 is never shorter than for stop.
        """
        text = self.span(start, stop)
        if not text or self.is_sentence_start(stop):
            return text
        if text.endswith(","):
            text = text[:-1]
        quoted = self.span(self.sentence_start(stop - 1), stop).count('"') % 2 == 1
        return text + ('."' if quoted else ".")

    def separator_before(self, index: int) -> str:
        """The separator that precedes word `index` in the stream (PARAGRAPH_BREAK or a space)."""
        self._grow(index + 1)
        return self._separator(index)

    def _separator(self, index: int) -> str:
        return PARAGRAPH_BREAK if index in self._breaks else " "

    def is_sentence_start(self, index: int) -> bool:
        self._grow(index + 1)
        position = bisect.bisect_left(self._starts, index)
        return position < len(self._starts) and self._starts[position] == index

    def sentence_start(self, index: int) -> int:
        """The first word of the sentence that holds word `index`."""
        self._grow(index + 1)
        return self._starts[bisect.bisect_right(self._starts, index) - 1]

    def boundary_near(self, index: int, limit: int) -> int:
        """The sentence boundary in [0, limit] closest to word `index` (limit itself counts as one).

        Used to place a needle between sentences at a requested depth of `limit` filler words.
        """
        index = max(0, min(index, limit))
        self._grow(limit + 1)
        candidates = [limit]
        position = bisect.bisect_right(self._starts, index)
        for near in (position - 1, position):
            if 0 <= near < len(self._starts) and self._starts[near] <= limit:
                candidates.append(self._starts[near])
        return min(candidates, key=lambda c: (abs(c - index), c))

    @staticmethod
    def ends_sentence(text: str) -> bool:
        return text.endswith(_TERMINAL)
