"""Long texts through tiktoken in paragraph-aligned chunks whose tokens are remembered.

Calibrating a long case tokenizes nearly the same prompt several times: each search step renders
more or less filler, and the needle's offsets are measured on the prompt cut before and after the
needle. Most of that text is the same from call to call, only shifted. So a long text is cut into
chunks at content-defined points (a paragraph break whose next characters hash to 0 mod CUT_ODDS,
so the cuts fall in the same places of the same prose wherever it sits in the prompt), and each
chunk's tokens are kept (up to CACHE_TOKENS): a later call encodes only the chunks it has not seen.

The cut is exact for cl100k's pre-tokenizer: a cut falls right after a newline that is followed by a
non-space character, and none of cl100k's pieces runs from a newline into a non-space character
(letters, digits and punctuation pieces never start with a newline; whitespace pieces hold only
whitespace), so the chunks' tokens, concatenated, are the whole text's tokens
(tests/recall_eval/test_tiktoken_chunks.py checks it on prose and on edge cases).
"""

from __future__ import annotations

import threading
import zlib
from array import array
from collections import OrderedDict
from typing import Any

MIN_CHUNK_CHARS = 8_192  # no cut closer than this to the previous one
CUT_ODDS = 128  # one paragraph break in this many is a cut: chunks of ~45K characters of prose
HASHED_CHARS = 16  # characters after the break that decide whether it is a cut
CACHE_TOKENS = 4_000_000  # tokens kept over all chunks (4 bytes each)


def cut_points(text: str, min_chunk_chars: int = MIN_CHUNK_CHARS, cut_odds: int = CUT_ODDS) -> list[int]:
    """Offsets where the text may be cut: after a newline, before a non-space character, at a
    content-defined place, at least min_chunk_chars after the previous cut."""
    cuts, previous = [], 0
    at = text.find("\n", min_chunk_chars)
    while at != -1:
        after = at + 1
        if after - previous >= min_chunk_chars and after < len(text) and not text[after].isspace():
            if zlib.crc32(text[after : after + HASHED_CHARS].encode()) % cut_odds == 0:
                cuts.append(after)
                previous = after
        at = text.find("\n", after)
    return cuts


class ChunkedEncoder:
    """encode(text) == encoding.encode(text, disallowed_special=()), reusing the tokens of chunks
    seen before. Thread-safe (the cache is locked; chunks are encoded outside the lock).

    The reference server's tokenizer uses it too (launchers/reference/tokenizer.py), with smaller
    chunks: its byte-level BPE's pre-tokenizer (GPT-2's pattern, digits split one by one) has no
    piece that runs from a newline into a non-space character either."""

    def __init__(
        self,
        encoding: Any,
        cache_tokens: int = CACHE_TOKENS,
        min_chunk_chars: int = MIN_CHUNK_CHARS,
        cut_odds: int = CUT_ODDS,
    ):
        self.encoding = encoding
        self.cache_tokens = cache_tokens
        self.min_chunk_chars = min_chunk_chars
        self.cut_odds = cut_odds
        self._chunks: OrderedDict[str, array] = OrderedDict()
        self._held = 0  # tokens in _chunks
        self._lock = threading.Lock()
        self.encoded_chars = 0  # characters that went through the encoder (the rest came from the cache)

    def _encode(self, text: str) -> list[int]:
        self.encoded_chars += len(text)
        return self.encoding.encode(text, disallowed_special=())

    def encode(self, text: str) -> list[int]:
        cuts = (
            cut_points(text, self.min_chunk_chars, self.cut_odds)
            if len(text) >= 2 * self.min_chunk_chars
            else []
        )
        if not cuts:
            return self._encode(text)
        tokens: list[int] = []
        for start, stop in zip([0, *cuts], [*cuts, len(text)], strict=True):
            chunk = text[start:stop]
            with self._lock:
                held = self._chunks.get(chunk)
                if held is not None:
                    self._chunks.move_to_end(chunk)
            if held is None:
                encoded = self._encode(chunk)
                tokens += encoded
                self._keep(chunk, array("I", encoded))
            else:
                tokens += held
        return tokens

    def _keep(self, chunk: str, tokens: array) -> None:
        with self._lock:
            self._keep_locked(chunk, tokens)

    def _keep_locked(self, chunk: str, tokens: array) -> None:
        if chunk in self._chunks:  # another thread encoded it meanwhile
            return
        self._chunks[chunk] = tokens
        self._held += len(tokens)
        while self._held > self.cache_tokens and len(self._chunks) > 1:
            _, dropped = self._chunks.popitem(last=False)
            self._held -= len(dropped)
