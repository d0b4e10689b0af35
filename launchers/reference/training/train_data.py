"""Training samples for the reference model, made from the suites' training examples.

The examples come from suites.training_corpus (train-only value pools and seeds); train.py
passes them in, so this module imports nothing from suites. For most examples the code value
is replaced, everywhere it occurs, by a fresh random code of the same shape (WORD-NNNN-WORD,
random letters): with only ~60 pool words the model could otherwise learn to complete words it
has memorised instead of copying them, and evaluation values are words it never saw. Random
words that happen to be evaluation-pool words are redrawn (`forbidden`).
"""

from __future__ import annotations

import random
import re
import string
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np
import torch

from launchers.reference.tokenizer import ChatTokenizer, render_chat

CODE_RE = re.compile(r"\b[A-Z]{3,}-\d{4}-[A-Z]{3,}\b")


@dataclass(frozen=True)
class Sample:
    ids: np.ndarray  # int32 prompt + answer + eos
    answer_start: int  # index of the first answer token in ids


def random_code(rng: random.Random, forbidden: set[str]) -> str:
    def word() -> str:
        while True:
            w = "".join(rng.choice(string.ascii_uppercase) for _ in range(rng.randint(3, 8)))
            if w not in forbidden:
                return w

    return f"{word()}-{rng.randint(1000, 9999)}-{word()}"


def randomize_value(
    messages: list[dict[str, str]], answer: str, rng: random.Random, forbidden: set[str]
) -> tuple[list[dict[str, str]], str]:
    """Replace the answer (a code value) by a random code everywhere it occurs."""
    if not CODE_RE.fullmatch(answer):
        return messages, answer
    new = random_code(rng, forbidden)
    return [{**m, "content": m["content"].replace(answer, new)} for m in messages], new


def random_name(rng: random.Random, forbidden: set[str]) -> str:
    """A capitalised pseudo-word of 2-4 syllables, e.g. "Tavorin" (never a forbidden name)."""
    consonants, vowels = "bcdfghjklmnprstvwz", "aeiouy"
    while True:
        syllables = [
            rng.choice(consonants)
            + rng.choice(vowels)
            + (rng.choice(consonants) if rng.random() < 0.3 else "")
            for _ in range(rng.randint(2, 4))
        ]
        name = "".join(syllables).capitalize()
        if name not in forbidden:
            return name


def randomize_key(
    messages: list[dict[str, str]], key_re: re.Pattern[str], rng: random.Random, forbidden: set[str]
) -> list[dict[str, str]]:
    """Replace the proper name of the key the last message asks about ("the Sundial archive")
    by a random name everywhere, so that finding the fact cannot rely on memorised names."""
    found = key_re.findall(messages[-1]["content"])
    if not found:
        return messages
    name = found[-1]
    new = random_name(rng, forbidden)
    pattern = re.compile(rf"\b{re.escape(name)}\b")
    return [{**m, "content": pattern.sub(new, m["content"])} for m in messages]


def encode_examples(
    tokenizer: ChatTokenizer,
    examples: Iterable[tuple[list[dict[str, str]], str]],
) -> list[Sample]:
    """(messages, answer) pairs -> samples: template(messages) + <|assistant|> + answer + <|end|>."""
    pairs = list(examples)
    prompts = tokenizer.encode_batch([render_chat(m, add_generation_prompt=True) for m, _ in pairs])
    answers = tokenizer.encode_batch([a for _, a in pairs])
    eos = tokenizer.eos_token_id
    return [
        Sample(np.asarray(p + a + [eos], dtype=np.int32), len(p))
        for p, a in zip(prompts, answers, strict=True)
    ]


@dataclass(frozen=True)
class Batch:
    tokens: torch.Tensor  # (B, T) int64, right-padded
    qpos: torch.Tensor  # (B, Q) positions whose next token is a target
    targets: torch.Tensor  # (B, Q) next tokens; -100 where padded
    is_answer: torch.Tensor  # (B, Q) bool: answer (and eos) targets, else language-model targets

    def to(self, device: torch.device | str) -> Batch:
        return Batch(
            *(t.to(device, non_blocking=True) for t in (self.tokens, self.qpos, self.targets, self.is_answer))
        )


def make_batch(samples: Sequence[Sample], n_lm: int, rng: np.random.Generator, pad_id: int) -> Batch:
    """Answer targets of every sample plus n_lm random earlier positions (plain next-token targets)."""
    t = max(len(s.ids) for s in samples)
    q = max(len(s.ids) - s.answer_start for s in samples) + n_lm
    tokens = np.full((len(samples), t), pad_id, dtype=np.int64)
    qpos = np.zeros((len(samples), q), dtype=np.int64)
    targets = np.full((len(samples), q), -100, dtype=np.int64)
    is_answer = np.zeros((len(samples), q), dtype=bool)
    for i, s in enumerate(samples):
        n = len(s.ids)
        tokens[i, :n] = s.ids
        ans = np.arange(s.answer_start - 1, n - 1)
        lm = rng.choice(s.answer_start - 1, size=min(n_lm, s.answer_start - 1), replace=False)
        pos = np.concatenate([ans, np.sort(lm)])
        qpos[i, : len(pos)] = pos
        targets[i, : len(pos)] = s.ids[pos + 1]
        is_answer[i, : len(ans)] = True
    return Batch(*(torch.from_numpy(a) for a in (tokens, qpos, targets, is_answer)))


def bucket_batches(
    samples: Sequence[Sample], tokens_per_batch: int, bucket_width: int, max_batch: int
) -> list[list[int]]:
    """Group sample indices of similar length into batches of about tokens_per_batch tokens."""
    buckets: dict[int, list[int]] = {}
    for i, s in enumerate(samples):
        buckets.setdefault(len(s.ids) // bucket_width, []).append(i)
    batches = []
    for key, idx in buckets.items():
        size = max(1, min(max_batch, tokens_per_batch // ((key + 1) * bucket_width)))
        batches.extend(idx[j : j + size] for j in range(0, len(idx), size))
    return batches
