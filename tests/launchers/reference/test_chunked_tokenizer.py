"""The reference tokenizer encodes long texts in cached chunks (launchers/reference/tokenizer.py, through
recall_eval/tiktoken_chunks.py): the same ids as encoding the whole text at once, for prose with needles
and chat markup, for every kind of line break and first character, and calibration's repeated texts
are mostly not encoded again."""

from __future__ import annotations

import random

import pytest

from launchers.reference.engine_api import WEIGHTS_DIR
from launchers.reference.tokenizer import CHUNK_MIN_CHARS, ChatTokenizer, render_chat
from recall_eval.tiktoken_chunks import cut_points
from suites.filler import FillerText
from suites.needle import NeedleParams, needle_recipes
from tests.recall_eval.test_tiktoken_chunks import _edgy_text


@pytest.fixture()
def tokenizer() -> ChatTokenizer:
    return ChatTokenizer(WEIGHTS_DIR / "tokenizer.json")


def _whole(tokenizer: ChatTokenizer, text: str) -> list[int]:
    return tokenizer.encode_batch([text])[0]


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_chunked_ids_are_the_whole_texts_ids(tokenizer, seed):
    """Paragraphs joined by every kind of line break (\\r\\n, trailing spaces, runs of newlines) and
    starting with letters, digits (split one per token), quotes, non-ASCII and a special token."""
    text = _edgy_text(random.Random(seed), 600).replace("<|endoftext|>", "<|end|>")
    assert len(cut_points(text, CHUNK_MIN_CHARS, 4)) >= 20  # the text is really cut
    assert tokenizer.encode(text) == _whole(tokenizer, text)
    assert tokenizer.encode(text) == _whole(tokenizer, text)  # again, from the cache


def test_calibration_s_renders_of_a_needle_grid_are_exact_and_mostly_reused(tokenizer):
    """The prompts a sweep's calibration tokenizes: chat-rendered needle cases of one trial at several
    lengths and depths, each at a few filler sizes around its target."""
    params = NeedleParams(lengths=(2000, 6000), depths=(0.0, 40.0, 100.0), trials=1, seed=3)
    texts = [
        render_chat([m.model_dump() for m in recipe.render(round(recipe.words_guess(1.2) * f)).messages])
        for recipe in needle_recipes(params)
        for f in (0.9, 1.0, 1.02)
    ]
    for text in texts:
        assert tokenizer.encode(text) == _whole(tokenizer, text)
    encoded = tokenizer._chunked.encoded_chars
    assert encoded < sum(map(len, texts)) / 2, (encoded, sum(map(len, texts)))


def test_short_texts_are_encoded_whole(tokenizer):
    for text in ("", "Hello.\nWorld", "<|user|>hi<|end|><|assistant|>", "9" * 50):
        assert tokenizer.encode(text) == _whole(tokenizer, text)
    one_line = FillerText(4).words(3000).replace("\n", " ")
    assert cut_points(one_line, CHUNK_MIN_CHARS, 4) == []
    assert tokenizer.encode(one_line) == _whole(tokenizer, one_line)
