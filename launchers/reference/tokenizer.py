"""The reference model's tokenizer (a byte-level BPE trained by train_tokenizer) and chat template.

- Byte-level BPE: any text encodes (every byte is a token); digits are split one per token
  before BPE, so numbers are copied digit by digit.
- Chat template: each message is `<|role|>content<|end|>`; the generation prompt is
  `<|assistant|>`; the model ends its turn with `<|end|>` (the eos token).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

from recall_eval.tiktoken_chunks import ChunkedEncoder

# Long texts are encoded in content-defined chunks whose ids are kept (recall_eval/tiktoken_chunks.py):
# calibration sends the same filler again and again (each search step, each depth and length of a
# trial), and a chat request's prompt is the text calibration tokenized. Small chunks (a cut allowed
# every 512 characters, one paragraph break in 4 is one) find most of it: the default sweep's
# tokenize calls encoded 12% of their characters instead of all (tests/benchmarks/bench_send_order.py).
CHUNK_MIN_CHARS = 512
CHUNK_CUT_ODDS = 4
CHUNK_CACHE_TOKENS = 1_000_000  # ~4 MB of ids and ~4 MB of their text

END = "<|end|>"
ROLE_TOKENS = {"system": "<|system|>", "user": "<|user|>", "assistant": "<|assistant|>"}
PAD = "<|pad|>"
SPECIAL_TOKENS = [PAD, END, *ROLE_TOKENS.values()]


def render_chat(messages: Iterable[dict[str, str]], add_generation_prompt: bool = True) -> str:
    parts = []
    for message in messages:
        role = message["role"]
        if role not in ROLE_TOKENS:
            raise ValueError(f"unknown chat role {role!r}: expected system, user or assistant")
        parts.append(f"{ROLE_TOKENS[role]}{message['content']}{END}")
    if add_generation_prompt:
        parts.append(ROLE_TOKENS["assistant"])
    return "".join(parts)


def train_tokenizer(texts: Iterable[str], vocab_size: int) -> Tokenizer:
    """A byte-level BPE with individually split digits, trained on `texts`."""
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.Digits(individual_digits=True), pre_tokenizers.ByteLevel(add_prefix_space=False)]
    )
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=4,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(texts, trainer=trainer)
    return tok


class ChatTokenizer:
    """Encoding, decoding and the chat template of the shipped tokenizer.json."""

    def __init__(self, path: Path):
        self.tokenizer = Tokenizer.from_file(str(path))
        self.eos_token_id = self._id(END)
        self.pad_token_id = self._id(PAD)
        self.vocab_size = self.tokenizer.get_vocab_size()
        self._chunked = ChunkedEncoder(
            _WholeTexts(self), CHUNK_CACHE_TOKENS, min_chunk_chars=CHUNK_MIN_CHARS, cut_odds=CHUNK_CUT_ODDS
        )

    def _id(self, token: str) -> int:
        token_id = self.tokenizer.token_to_id(token)
        if token_id is None:
            raise ValueError(f"tokenizer has no {token} token")
        return token_id

    def chat_prompt(self, messages: list[dict[str, str]], add_generation_prompt: bool = True) -> str:
        return render_chat(messages, add_generation_prompt)

    def encode(self, text: str) -> list[int]:
        """The text's ids (special tokens in it encoded as such), reusing the ids of chunks seen before:
        the same ids as encoding it whole, since a cut falls after a newline before a non-space
        character and no pre-token of this tokenizer runs across that
        (tests/launchers/reference/test_chunked_tokenizer.py)."""
        return self._chunked.encode(text)

    def encode_batch(self, texts: list[str]) -> list[list[int]]:
        # encode_batch_fast (tokenizers >= 0.21) skips the character offsets nobody here reads: the same
        # ids in ~60% of the time (a 585K-character prompt: 0.43 s against 0.69 s on the 2-core machine),
        # which /v1/tokenize and every prompt's encoding pay
        fast = getattr(self.tokenizer, "encode_batch_fast", None)
        encode = fast if fast is not None else self.tokenizer.encode_batch
        return [e.ids for e in encode(texts, add_special_tokens=False)]

    def decode(self, token_ids: list[int]) -> str:
        return self.tokenizer.decode(token_ids, skip_special_tokens=True)


class _WholeTexts:
    """What the chunk cache encodes a chunk (or a short text) with: the tokenizer, one text at a time."""

    def __init__(self, tokenizer: ChatTokenizer):
        self.tokenizer = tokenizer

    def encode(self, text: str, disallowed_special: tuple[str, ...] = ()) -> list[int]:
        return self.tokenizer.encode_batch([text])[0]
