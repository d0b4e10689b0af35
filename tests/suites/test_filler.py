from __future__ import annotations

import re
from itertools import pairwise

import pytest

from suites import lexicon
from suites.filler import PARAGRAPH_BREAK, FillerText
from suites.values import KEY_KINDS, POOLS, code_words, key_names

KEY_PHRASES = ("secret code", "access code", "passphrase", "password", "vault", "the code")


def _bare(word: str) -> str:
    return re.sub(r"[^a-z]", "", word.lower().removesuffix("'s"))


def test_same_seed_same_stream_and_different_seeds_differ() -> None:
    assert FillerText(3).words(500) == FillerText(3).words(500)
    assert FillerText(3).words(500) != FillerText(4).words(500)
    assert FillerText("a").words(50) != FillerText("b").words(50)


def test_words_returns_exactly_n_words_and_is_a_prefix_stream() -> None:
    filler = FillerText(11)
    previous = ""
    for n in range(0, 400):
        text = filler.words(n)
        assert len(text.split()) == n
        assert text.startswith(previous)
        previous = text
    # Growing a fresh stream in one go gives the same words as growing it step by step.
    assert FillerText(11).words(399) == filler.words(399)


def test_a_span_is_its_words_joined_with_their_separators() -> None:
    """span() slices the joined stream: the same text as joining the words, wherever the stream was
    grown (in one go or in steps, spans crossing the points where it grew)."""
    whole = FillerText(5).words(9_000)  # grown in one go; its words found again by whitespace
    words = [match.span() for match in re.finditer(r"\S+", whole)]
    assert len(words) == 9_000
    filler = FillerText(5)
    for grown in (7, 130, 131, 2_000, 9_000):
        filler.words(grown)
        for start, stop in ((0, grown), (1, grown), (grown // 2, grown), (3, 4), (grown - 1, grown)):
            expected = whole[words[start][0] : words[stop - 1][1]]
            assert filler.span(start, stop) == expected, (start, stop)
            assert filler.separator_before(stop - 1) == (
                whole[words[stop - 2][1] : words[stop - 1][0]] if stop > 1 else filler.separator_before(0)
            )
    assert filler.span(4, 4) == "" and filler.span(9, 3) == ""


def test_closed_span_ends_a_sentence_and_grows_with_n() -> None:
    filler = FillerText(5)
    lengths = [len(filler.closed_span(0, n)) for n in range(0, 600)]
    assert all(b > a for a, b in pairwise(lengths))
    for n in range(1, 600):
        assert FillerText.ends_sentence(filler.closed_span(0, n)), n


def test_sentence_boundaries() -> None:
    filler = FillerText(9)
    text_words = filler.words(2000).split()
    starts = [i for i in range(1, 2000) if filler.is_sentence_start(i)]
    assert len(starts) > 50
    for i in starts:
        assert FillerText.ends_sentence(text_words[i - 1]), text_words[i - 1]
        assert text_words[i][0].isupper() or text_words[i][:2] == '"' + text_words[i][1:2].upper()
        assert filler.sentence_start(i) == i
        if not filler.is_sentence_start(i + 1):
            assert filler.sentence_start(i + 1) == i
    assert filler.is_sentence_start(0)
    for target in (0, 1, 17, 500, 999, 1000):
        at = filler.boundary_near(target, 1000)
        assert at == 1000 or filler.is_sentence_start(at)
        assert abs(at - target) <= 40  # sentences are short
    assert filler.boundary_near(0, 1000) == 0 and filler.boundary_near(1000, 1000) == 1000


def test_paragraphs_exist() -> None:
    text = FillerText(1).words(3000)
    paragraphs = text.split(PARAGRAPH_BREAK)
    assert 20 < len(paragraphs) < 300
    assert all(p and not p.startswith(" ") for p in paragraphs)


@pytest.mark.parametrize("seed", range(40))
def test_filler_never_looks_like_a_fact(seed: int) -> None:
    text = FillerText(seed).words(5000)
    assert not re.search(r"\d", text)
    assert not re.search(r"[A-Z]{2,}", text)  # no upper-case codes
    lowered = text.lower()
    for phrase in KEY_PHRASES:
        assert phrase not in lowered
    words = {_bare(w) for w in text.split()}
    assert not words & lexicon.BANNED_WORDS
    assert not words & set(KEY_KINDS)
    for pool in POOLS:
        assert not words & {w.lower() for w in code_words(pool) + key_names(pool)}


def test_filler_is_varied() -> None:
    text = FillerText(0).words(20000)
    words = [_bare(w) for w in text.split()]
    assert len(set(words)) > 400
    sentences = re.split(r"(?<=[.?!])\s+", text)
    assert len(set(sentences)) > 0.97 * len(sentences)
