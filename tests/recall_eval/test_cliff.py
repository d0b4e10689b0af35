"""The cliff finder's policy (recall_eval.cliff) driven by simulated servers: the bracket, the sequential
decisions, the ends of the range, and the cost against the full grid."""

from __future__ import annotations

import numpy as np
import pytest

from recall_eval.cliff import CliffSearch, LengthSearch, is_search, parse_search
from recall_eval.errors import BadInput


def drive(search: LengthSearch, batch: int, recall_at, rng=None) -> CliffSearch:
    policy = CliffSearch(search, batch)
    steps = 0
    while (length := policy.next_length()) is not None:
        p = recall_at(length)
        passes = int(rng.binomial(batch, p)) if rng is not None else round(batch * p)
        policy.record(length, passes, batch, batch)
        steps += 1
        assert steps < 500
    return policy


def test_sharp_cliff_is_bracketed_within_five_percent_for_far_less_than_the_grid() -> None:
    """Recall 1 up to 3,000 tokens, 0 above: the bracket holds 3,000, its ends within 5% of each other; a
    fall is decided after one batch (0/2: Wilson high 0.66 < 0.9), a hold spends the budget (20/20 never
    has a Wilson low above 0.9), and the grid at the same resolution costs more than twice as much."""
    search = LengthSearch(500, 16000, 8)
    policy = drive(search, 2, lambda n: 1.0 if n <= 3000 else 0.0)
    held, fell = policy.bracket()
    assert held <= 3000 < fell and fell / held <= 1.05
    for length, tally in policy.tallies.items():
        assert tally.trials == (8 if length <= 3000 else 2)
        assert tally.on_budget == (length <= 3000)
    lengths, cases = policy.grid_equivalent(1)
    assert cases == lengths * 8 and policy.cases_spent < cases / 2


def test_range_ends() -> None:
    """Recall already low at MIN: no length held; still high at MAX: none fell; each costs two lengths."""
    low = drive(LengthSearch(500, 16000, 8), 2, lambda n: 0.0)
    assert low.bracket() == (None, 500) and list(low.tallies) == [500]
    high = drive(LengthSearch(500, 16000, 8), 2, lambda n: 1.0)
    assert high.bracket() == (16000, None) and list(high.tallies) == [500, 16000]


def test_noisy_cliff_sequential_decisions() -> None:
    """Recall 0.99 up to 5,000 tokens and 0.3 above, sampled on ten seeds: the bracket always lands within
    10% of 5,000 (a decision made on the budget can put it one bisection step off the exact cliff)."""
    for seed in range(10):
        recall = lambda n: 0.99 if n <= 5000 else 0.3  # noqa: E731
        policy = drive(LengthSearch(1000, 32000, 12), 3, recall, np.random.default_rng(seed))
        held, fell = policy.bracket()
        assert held is not None and fell is not None and 4500 <= held < fell <= 5500, (seed, held, fell)


@pytest.mark.parametrize(
    ("spec", "names"),
    [("search:", "search:MIN..MAX"), ("search:900..800", "below MAX"), ("search:0..10", "at least 1"),
     ("search:1..10:0", "at least 1 trial")],
)  # fmt: skip
def test_bad_search_specs(spec: str, names: str) -> None:
    with pytest.raises(BadInput) as err:
        parse_search(spec)
    assert names in str(err.value)


def test_parse() -> None:
    assert parse_search("search:1000..64000") == LengthSearch(1000, 64000, 12)
    assert parse_search("search:1000..64000:20").budget == 20
    assert is_search("search:1..2") and not is_search("338..4096") and not is_search((1, 2))
