"""Text and samples from the suites' training generator, for the tokenizer and for training.

This offline tooling is the one place under launchers/ that reads suites/ (the issue asks for
training documents made by the project's own suite generators); the imports are local to the
functions so that the engine and server never load suites.
"""

from __future__ import annotations

import functools
import random
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from launchers.reference.tokenizer import ChatTokenizer, render_chat
from launchers.reference.training.train_data import (
    Sample,
    encode_examples,
    randomize_all_codes,
    randomize_all_keys,
    randomize_services,
)

CODE_RE = re.compile(r"\b[A-Z]{3,}-\d{4}-[A-Z]{3,}\b")
TOKENS_PER_WORD = 1.19  # measured on needle documents with the shipped tokenizer
FIXED_TOKENS = 40  # template, question and needle sentence, roughly


def words_for_tokens(tokens: int) -> int:
    return max(10, round((tokens - FIXED_TOKENS) / TOKENS_PER_WORD))


def tokenizer_texts(seed: int, n: int, kinds: Sequence[str]) -> Iterator[str]:
    """Rendered training chats with code values removed, so that no code word becomes a token:
    codes of any pool then split into the same small pieces (mostly single letters)."""
    from suites.training_corpus import iter_training_examples

    for example in iter_training_examples(seed, n, 50, 2000, tuple(kinds)):
        text = render_chat([*example.messages, {"role": "assistant", "content": example.answer}], False)
        yield CODE_RE.sub("", text)


def config_texts(seed: int, n: int) -> Iterator[str]:
    """Rendered training config chats (all formats), service names random as in training: what the
    config-aware merges are learned on (no service word of the training pool becomes a token)."""
    from suites.training_corpus import iter_training_examples

    rng = random.Random(seed)
    _, services = _train_names()
    for example in iter_training_examples(seed, n, 50, 1200, ("config",)):
        messages = randomize_services(example.messages, set(services), rng, set(_forbidden_words()))
        yield render_chat([*messages, {"role": "assistant", "content": example.answer}], False)


@functools.cache
def _tokenizer(path: str) -> ChatTokenizer:
    return ChatTokenizer(Path(path))


@functools.cache
def _forbidden_words() -> frozenset[str]:
    from suites.config_vocab import ROLES, SUBSECTIONS, services
    from suites.values import code_words, key_names

    # random code words, key names and service names must never equal an evaluation word or name
    return (
        frozenset(code_words("eval"))
        | frozenset(key_names("eval"))
        | frozenset({*services("eval"), *ROLES, *SUBSECTIONS})
    )


@functools.cache
def _train_names() -> tuple[frozenset[str], frozenset[str]]:
    """The training pool's key names and config service words (what randomisation replaces)."""
    from suites.config_vocab import services
    from suites.values import key_names

    return frozenset(key_names("train")), frozenset(services("train"))


@functools.cache
def _key_re() -> re.Pattern[str]:
    from suites.values import KEY_KINDS

    return re.compile(r"\b([A-Z][a-z]+) (?:" + "|".join(KEY_KINDS) + r")\b")


@dataclass(frozen=True)
class ShardSpec:
    seed: int
    n: int
    min_words: int
    max_words: int
    kinds: tuple[str, ...]
    randomize: float  # share of examples whose code values are replaced by random codes
    tokenizer_path: str
    randomize_keys: float = 0.0  # share whose key names (config: service names) become random words


def make_kind_shard(spec: ShardSpec) -> tuple[str, list[Sample]]:
    """(kind, samples) of a one-kind shard, so that training can keep curves per kind."""
    return "+".join(spec.kinds), make_shard(spec)


def make_shard(spec: ShardSpec) -> list[Sample]:
    """Encoded samples of one shard (runs in a worker process)."""
    from suites.training_corpus import iter_training_examples

    rng = random.Random(spec.seed)
    forbidden = set(_forbidden_words())
    key_names, services = _train_names()
    pairs = []
    for example in iter_training_examples(spec.seed, spec.n, spec.min_words, spec.max_words, spec.kinds):
        messages, answer = example.messages, example.answer
        if rng.random() < spec.randomize:  # config values are random by construction
            messages, answer = randomize_all_codes(messages, answer, rng, forbidden)
        if rng.random() < spec.randomize_keys:
            if example.kind.startswith("config"):
                messages = randomize_services(messages, set(services), rng, forbidden)
            else:
                messages = randomize_all_keys(messages, _key_re(), set(key_names), rng, forbidden)
        pairs.append((messages, answer))
    return encode_examples(_tokenizer(spec.tokenizer_path), pairs)
