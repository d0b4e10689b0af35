"""Training samples for the reference model, made from the suites' training examples.

The examples come from suites.training_corpus (train-only value pools and seeds); train.py
passes them in, so this module imports nothing from suites. For most examples every code value
is replaced, everywhere it occurs, by a fresh random code of the same shape (WORD-NNNN-WORD,
random letters), and every key name (config: every service name) by a random pseudo-word: with
only ~60 pool words the model could otherwise learn to complete words it has memorised instead of
copying them, and evaluation values and names are words it never saw. All of a chat's codes and
names are replaced, never the asked one alone (that would mark the answer). Random words that
happen to be evaluation-pool words are redrawn (`forbidden`).
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


def _replace_all(
    messages: list[dict[str, str]], answer: str, mapping: dict[str, str], flags: int = 0
) -> tuple[list[dict[str, str]], str]:
    """Every whole-word occurrence of each mapping key (letters on neither side) replaced by its value."""
    if not mapping:
        return messages, answer
    pattern = re.compile(
        r"(?<![A-Za-z])("
        + "|".join(map(re.escape, sorted(mapping, key=len, reverse=True)))
        + r")(?![A-Za-z])",
        flags,
    )

    def sub(text: str) -> str:
        return pattern.sub(lambda m: mapping[m.group(1)], text)

    return [{**m, "content": sub(m["content"])} for m in messages], sub(answer)


def randomize_all_codes(
    messages: list[dict[str, str]], answer: str, rng: random.Random, forbidden: set[str]
) -> tuple[list[dict[str, str]], str]:
    """Every code value in the chat (the asked one and the others of a multi-turn chat alike, so that
    no random-looking code marks the answer) replaced by its own random code of the same shape."""
    codes = dict.fromkeys(c for m in messages for c in CODE_RE.findall(m["content"]))
    return _replace_all(messages, answer, {c: random_code(rng, forbidden) for c in codes})


def randomize_all_keys(
    messages: list[dict[str, str]],
    key_re: re.Pattern[str],
    names: set[str],
    rng: random.Random,
    forbidden: set[str],
) -> list[dict[str, str]]:
    """Every key name of the pool `names` ("Sundial" of "Sundial archive") in the chat replaced by its
    own random pseudo-word (only pool names: "The archive" must keep its "The")."""
    found = dict.fromkeys(n for m in messages for n in key_re.findall(m["content"]) if n in names)
    return _replace_all(messages, "", {n: random_name(rng, forbidden) for n in found})[0]


def randomize_services(
    messages: list[dict[str, str]], services: set[str], rng: random.Random, forbidden: set[str]
) -> list[dict[str, str]]:
    """Config documents: every service word of the pool (`tickets` of the block `tickets_api`, also
    as `TICKETS_API_...` in env files and `tickets-api` in manifests) replaced by its own random
    lowercase pseudo-word, so that finding an entry cannot rely on memorised block names."""
    text = "\n".join(m["content"] for m in messages)
    mapping: dict[str, str] = {}
    for service in sorted(services):
        if re.search(rf"(?<![A-Za-z]){service}(?![A-Za-z])", text, re.IGNORECASE):
            new = random_name(rng, forbidden).lower()
            mapping[service], mapping[service.upper()] = new, new.upper()
    return _replace_all(messages, "", mapping)[0]


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
