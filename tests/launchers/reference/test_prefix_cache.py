"""The prefix cache: the page tree on its own, and the engine's prefill after a hit against a full
prefill (bit for bit), eviction under a small pool, and the planted prefix_cache_stale_index fault."""

from __future__ import annotations

import pytest
import torch

from launchers.reference import faults
from launchers.reference.config import ModelConfig
from launchers.reference.inference import Runner, SequenceState, swa_lookback_start
from launchers.reference.kv_pool import KVPool
from launchers.reference.model import ReferenceModel
from launchers.reference.prefix_cache import PrefixCache

# small enough to be quick, deep enough that a hit restarts the SWA stack mid-prompt (window 16, 2 layers)
CFG = ModelConfig(
    vocab_size=64, d_model=64, n_heads=2, mlp_hidden=64, n_swa_layers=2, swa_window=16, n_dsa_layers=2
)


def test_tree_matches_whole_pages_and_keeps_the_last_token_to_prefill() -> None:
    cache = PrefixCache(page_size=4)
    prompt = list(range(10))  # pages [0..3], [4..7]; tokens 8, 9 are a partial page
    assert cache.insert(prompt, [7, 3]) == []
    hit = cache.match(list(range(8)) + [99])  # shares both pages
    assert hit.pages == [7, 3] and cache.evictable_pages == 0
    cache.release(hit)
    assert cache.match(list(range(8))).pages == [7]  # the last token must be prefilled: one page only
    assert cache.match([0, 1, 2, 5, 4]).pages == []  # differs inside the first page
    # a second request that prefilled the same prefix itself: its duplicate pages come back
    assert cache.insert(list(range(12)), [11, 12, 13]) == [11, 12]
    assert cache.cached_pages == 3


def test_eviction_takes_unlocked_leaves_least_recently_used_first() -> None:
    cache = PrefixCache(page_size=1)
    cache.insert([1, 2, 3], [10, 11, 12])
    cache.insert([5, 6], [20, 21])
    held = cache.match([1, 2, 3, 4])  # locks 10, 11, 12
    assert cache.evictable_pages == 2
    assert cache.evict(5) == [21, 20]  # the unlocked branch, leaf first; the locked one stays
    cache.release(held)
    assert cache.evict(1) == [12] and cache.cached_pages == 2


def _model() -> ReferenceModel:
    torch.manual_seed(0)
    return ReferenceModel(CFG).eval()


def _prefill(runner: Runner, seq: SequenceState, prompt: list[int], cached: int = 0):
    runner.prefill(seq, prompt, cached)
    blocks = seq.pages[: len(prompt) // 4]
    slots = (seq.pages.unsqueeze(1) * 4 + torch.arange(4)).flatten()[: len(prompt)]
    recent = slots[-CFG.swa_window :]
    pool = runner.pool
    return (
        seq.x_last.clone(),
        pool.index_k[:, blocks].view(torch.uint8).clone(),
        pool.dsa_k[:, slots].clone(),
        pool.swa_k[:, recent].clone(),
    )


@pytest.mark.parametrize("dtype", ["fp8", "bf16"])
def test_prefill_after_a_hit_equals_a_full_prefill_bit_for_bit(dtype: str) -> None:
    """Prompt B shares 200 tokens (50 pages) with a finished prompt A: after the hit B prefills 103
    tokens (the SWA stack from token 160, two windows back from the last window boundary), and
    what it leaves (last hidden state, index keys, DSA K, the SWA window decode reads) equals a
    full prefill of B exactly."""
    assert swa_lookback_start(200, CFG.swa_window, CFG.n_swa_layers) == 160
    model = _model()
    gen = torch.Generator().manual_seed(1)
    shared = torch.randint(0, 64, (200,), generator=gen).tolist()
    a = shared + torch.randint(0, 64, (57,), generator=gen).tolist()
    b = shared + torch.randint(0, 64, (103,), generator=gen).tolist()
    full_pool = KVPool(CFG, 400, dtype)  # type: ignore[arg-type]
    full = _prefill(Runner(model, full_pool), SequenceState(full_pool.allocate(len(b))), b)

    pool = KVPool(CFG, 800, dtype)  # type: ignore[arg-type]
    runner, cache = Runner(model, pool), PrefixCache(4)
    seq_a = SequenceState(pool.allocate(len(a)))
    runner.prefill(seq_a, a)
    cache.insert(a, seq_a.pages.tolist()[: len(a) // 4])
    hit = cache.match(b)
    assert hit.n_pages == 50
    seq_b = SequenceState(torch.cat([torch.tensor(hit.pages), pool.allocate(len(b), hit.n_pages)]))
    cached = _prefill(runner, seq_b, b, hit.n_pages * 4)
    for got, want in zip(cached, full, strict=True):
        assert torch.equal(got, want)


def test_stale_index_fault_leaves_the_new_pages_unkeyed() -> None:
    """With prefix_cache_stale_index a prefill after a hit writes K and V but not the index keys of
    its new pages (they keep a previous request's); without a hit it writes them as usual."""
    model = _model()
    prompt = torch.randint(0, 64, (120,), generator=torch.Generator().manual_seed(2)).tolist()
    keyed: dict[str | None, torch.Tensor] = {}
    for fault in (None, "prefix_cache_stale_index"):
        pool = KVPool(CFG, 2 * len(prompt), "fp8")
        pool.index_k.fill_(1.0)  # what "a previous request" left in every page
        seq = SequenceState(pool.allocate(len(prompt)))
        Runner(model, pool, fault).prefill(seq, prompt, cached=40)
        keyed[fault] = pool.index_k[:, seq.pages[10:30]].float()
        fresh = SequenceState(pool.allocate(len(prompt)))
        Runner(model, pool, fault).prefill(fresh, prompt)  # no hit: keys written either way
        assert not torch.all(pool.index_k[:, fresh.pages[:30]].float() == 1.0)
    assert torch.all(keyed["prefix_cache_stale_index"] == 1.0)
    assert not torch.all(keyed[None] == 1.0)
    assert faults.skips_index_store("prefix_cache_stale_index", 4)
    assert not faults.skips_index_store("prefix_cache_stale_index", 0)
    with pytest.raises(ValueError, match="needs the prefix cache"):
        faults.check("prefix_cache_stale_index", "fp8", prefix_cache=False)


def test_a_full_pool_evicts_cached_pages_for_a_new_request() -> None:
    """A pool of 64 pages, 50 of them held by the cache: a request for 40 pages takes 26 back."""
    pool = KVPool(CFG, 256, "fp8")
    cache = PrefixCache(4)
    pool.reclaimable = lambda: cache.evictable_pages
    pool.reclaim = cache.evict
    pages = pool.allocate(200).tolist()
    assert cache.insert(list(range(200)), pages) == []
    assert pool.free_pages == 64  # 14 free + 50 the cache gives back
    taken = pool.allocate(160)
    assert len(set(taken.tolist())) == 40 and cache.cached_pages == 24
