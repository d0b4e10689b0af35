from __future__ import annotations

import pytest

from suites.seeding import derive_rng
from suites.values import (
    CODE_RE,
    KEY_KINDS,
    POOLS,
    code_value,
    code_words,
    key_name,
    key_names,
    unique_code_value,
)


def test_pools_share_no_word_in_any_case() -> None:
    eval_words = {w.lower() for w in code_words("eval") + key_names("eval")}
    train_words = {w.lower() for w in code_words("train") + key_names("train")}
    assert not eval_words & train_words
    assert len(code_words("eval")) >= 50 and len(code_words("train")) >= 50
    assert len(key_names("eval")) >= 30 and len(key_names("train")) >= 30


def test_values_are_code_shaped_and_stay_in_their_pool() -> None:
    for pool in POOLS:
        other = {w for p in POOLS if p != pool for w in code_words(p)}
        rng = derive_rng("values-test", pool)
        for _ in range(2000):
            value = code_value(rng, pool)
            assert CODE_RE.fullmatch(value), value
            first, number, second = value.split("-")
            assert first != second and len(number) == 4
            assert first in code_words(pool) and second in code_words(pool)
            assert first not in other and second not in other


def test_key_names_stay_in_their_pool() -> None:
    rng = derive_rng("keys-test")
    for pool in POOLS:
        for _ in range(500):
            name, kind = key_name(rng, pool).split(" ")
            assert name in key_names(pool) and kind in KEY_KINDS


def test_unique_code_value_never_repeats() -> None:
    rng = derive_rng("unique")
    taken: set[str] = set()
    values = [unique_code_value(rng, "eval", taken) for _ in range(5000)]
    assert len(set(values)) == 5000 and taken == set(values)


def test_unknown_pool_is_rejected() -> None:
    with pytest.raises(ValueError, match="unknown value pool"):
        code_words("test")  # type: ignore[arg-type]
