"""The shipped BPE tokenizer and chat template."""

from __future__ import annotations

import pytest

from launchers.reference.engine_api import WEIGHTS_DIR
from launchers.reference.tokenizer import ChatTokenizer, render_chat


@pytest.fixture(scope="module")
def tok() -> ChatTokenizer:
    return ChatTokenizer(WEIGHTS_DIR / "tokenizer.json")


def test_digits_are_single_tokens(tok: ChatTokenizer) -> None:
    ids = tok.encode("4492")
    assert [tok.decode([i]) for i in ids] == ["4", "4", "9", "2"]


@pytest.mark.parametrize(
    "text", ["plain words", "Ünïcödé ✓ 漢字 🙂", "tabs\tand\nnewlines", "ZEBRA-4492-OMEGA"]
)
def test_any_text_round_trips(tok: ChatTokenizer, text: str) -> None:
    assert tok.decode(tok.encode(text)) == text


def test_chat_template(tok: ChatTokenizer) -> None:
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}]
    text = render_chat(messages)
    assert text == "<|system|>Be brief.<|end|><|user|>Hi<|end|><|assistant|>"
    assert render_chat(messages, add_generation_prompt=False).endswith("<|end|>")
    ids = tok.encode(text)
    assert ids.count(tok.eos_token_id) == 2  # special tokens are single ids
    assert tok.decode(ids) == "Be brief.Hi"
    with pytest.raises(ValueError):
        render_chat([{"role": "tool", "content": "x"}])


def test_vocabulary_is_small(tok: ChatTokenizer) -> None:
    assert 1000 < tok.vocab_size <= 4096


def test_fast_encoding_gives_the_full_encoders_ids(tok: ChatTokenizer) -> None:
    """encode() takes tokenizers' offset-free path where it exists: the ids must be the same."""
    from suites.filler import FillerText

    texts = [
        render_chat([{"role": "user", "content": "Code 4417-ab, café, 日本語 <|end|> x\n\n  y"}]),
        FillerText(2).words(30_000),
        "",
    ]
    for text in texts:
        assert tok.encode(text) == tok.tokenizer.encode(text, add_special_tokens=False).ids
    assert tok.encode_batch(texts) == [tok.encode(text) for text in texts]
