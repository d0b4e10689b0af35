"""The reference engine (engine_api.Engine) on the shipped weights: generation, pool admission,
kv_bytes_per_token, indexer top-k output, allocation failures."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import numpy as np
import pytest

from launchers.reference.engine import ReferenceEngine
from launchers.reference.engine_api import EngineOutOfMemory, EngineSettings, PoolTooSmall, StepOutput

FILLER = (
    "The old miller carried a basket along the river while the bells rang. "
    "Nobody knew why the quiet baker wanted to mend the lantern before the rain came. "
    "Every day in the square, the careful shepherd counts the sheep and the clouds. "
)
NEEDLES = [
    (
        "The secret code for the Falcon vault is ZEBRA-4492-OMEGA.",
        "What is the secret code for the Falcon vault? Answer with the code only.",
        "ZEBRA-4492-OMEGA",
    ),
    (
        "The access code of the Orion server is TUNDRA-1187-PRISM.",
        "What is the access code of the Orion server? Answer with the code only.",
        "TUNDRA-1187-PRISM",
    ),
]


@pytest.fixture(scope="module")
def engine() -> ReferenceEngine:
    return ReferenceEngine(
        EngineSettings(index_k_dtype="bf16", index_topk=64, max_total_tokens=8192, threads=2)
    )


def _needle_prompt(engine: ReferenceEngine, fact: str, question: str, repeats: int, at: int) -> list[int]:
    parts = [FILLER] * repeats
    parts.insert(at, fact + " ")
    messages = [{"role": "user", "content": "".join(parts) + "\n\n" + question}]
    return engine.encode(engine.chat_prompt(messages))


def _answer(engine: ReferenceEngine, prompt: list[int], max_new: int = 24) -> tuple[str, list[StepOutput]]:
    steps = list(engine.generate(prompt, max_new))
    return "".join(s.text for s in steps), steps


@pytest.mark.parametrize("fact,question,value", NEEDLES)
def test_recalls_a_needle_from_the_network(
    engine: ReferenceEngine, fact: str, question: str, value: str
) -> None:
    prompt = _needle_prompt(engine, fact, question, repeats=20, at=7)
    assert 1000 < len(prompt) < 2000
    text, steps = _answer(engine, prompt)
    assert text == value
    assert steps[-1].finish_reason == "stop" and steps[-1].token_id == engine.eos_token_id
    assert all(s.finish_reason is None for s in steps[:-1])


def test_stream_text_joins_to_the_decoded_tokens(engine: ReferenceEngine) -> None:
    fact, question, _ = NEEDLES[0]
    text, steps = _answer(engine, _needle_prompt(engine, fact, question, repeats=3, at=1))
    assert text == engine.decode([s.token_id for s in steps])


def test_max_new_tokens_ends_with_length(engine: ReferenceEngine) -> None:
    fact, question, _ = NEEDLES[0]
    steps = list(engine.generate(_needle_prompt(engine, fact, question, repeats=3, at=1), 3))
    assert len(steps) == 3 and steps[-1].finish_reason == "length"


def test_indexer_topk_per_generated_token(engine: ReferenceEngine) -> None:
    fact, question, _ = NEEDLES[1]
    prompt = _needle_prompt(engine, fact, question, repeats=6, at=2)
    steps = list(engine.generate(prompt, 4, return_indexer_topk=True))
    for i, step in enumerate(steps):
        sel = step.indexer_topk
        assert isinstance(sel, np.ndarray) and sel.dtype == np.int32
        assert sel.shape == (engine.n_indexer_layers, engine.settings.index_topk)
        # candidates: complete blocks before the query's block-aligned local window (64 tokens)
        n_candidates = (len(prompt) - 1 + i - 64 + 1) // 4
        valid = sel[sel >= 0]
        assert valid.size == engine.n_indexer_layers * min(engine.settings.index_topk, n_candidates)
        assert valid.max() < n_candidates
        for row in sel:
            assert len(set(row[row >= 0].tolist())) == (row >= 0).sum()  # no block twice
    assert all(s.indexer_topk is None for s in engine.generate(prompt, 2))


def test_kv_bytes_per_token_depends_on_index_key_dtype() -> None:
    fp8 = ReferenceEngine(EngineSettings(index_k_dtype="fp8", max_total_tokens=1024))
    bf16 = ReferenceEngine(EngineSettings(index_k_dtype="bf16", max_total_tokens=1024))
    cfg = fp8.model.cfg
    d_i, layers, ratio = cfg.index_head_dim, cfg.n_dsa_layers, cfg.compress_ratio
    # per compressed token: fp8 = D_I bytes + a 4-byte fp32 scale, bf16 = 2 * D_I bytes
    assert bf16.kv_bytes_per_token - fp8.kv_bytes_per_token == layers * (2 * d_i - (d_i + 4)) // ratio
    attention = (cfg.n_swa_layers + cfg.n_dsa_layers) * 2 * cfg.d_model * 2  # bf16 K and V
    assert fp8.kv_bytes_per_token == attention + layers * (d_i + 4) // ratio
    assert fp8.pool.bytes_total == fp8.kv_bytes_per_token * fp8.max_total_tokens


def test_request_larger_than_the_pool_is_refused() -> None:
    small = ReferenceEngine(EngineSettings(max_total_tokens=64))
    with pytest.raises(PoolTooSmall):
        next(small.generate(list(range(10, 70)), 8))
    assert small.available_tokens() == 64


def test_admission_waits_for_free_slots() -> None:
    eng = ReferenceEngine(EngineSettings(max_total_tokens=256, threads=1))
    first = eng.generate(list(range(10, 150)), 60)  # 200 slots: 50 pages of 4
    next(first)
    assert eng.available_tokens() == 56
    admitted = threading.Event()

    def second() -> None:
        for _ in eng.generate(list(range(10, 100)), 8):
            admitted.set()

    worker = threading.Thread(target=second)
    worker.start()
    deadline = time.monotonic() + 30
    while eng.pool.waiting == 0 and worker.is_alive() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert eng.pool.waiting == 1  # 98 slots do not fit in the 56 free ones: it is blocked in admission
    assert not admitted.is_set() and eng.available_tokens() == 56
    first.close()  # frees the first request's slots
    worker.join(timeout=60)
    assert admitted.is_set()
    assert eng.available_tokens() == 256


def test_allocator_failure_becomes_engine_out_of_memory(
    engine: ReferenceEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    def fail(*args: object, **kwargs: object) -> None:
        raise RuntimeError(
            "[enforce fail at alloc_cpu.cpp:117] DefaultCPUAllocator: can't allocate memory: you tried to allocate 1 bytes"
        )

    monkeypatch.setattr(engine.runner, "prefill", fail)
    with pytest.raises(EngineOutOfMemory) as err:
        next(engine.generate([11, 12, 13], 4))
    assert err.value.phase == "prefill"
    monkeypatch.undo()
    monkeypatch.setattr(engine.runner, "append", fail)
    with pytest.raises(EngineOutOfMemory) as err:
        list(engine.generate([11, 12, 13], 4))
    assert err.value.phase == "decode"
    assert engine.available_tokens() == engine.max_total_tokens  # slots freed after the failure


def test_shipped_weights_fit_the_budget(engine: ReferenceEngine) -> None:
    n_params = sum(p.numel() for p in engine.model.parameters())
    assert n_params <= 20_000_000
    weights = Path(engine.settings.weights_dir) / "model.safetensors"
    assert weights.stat().st_size <= 20 * 1024 * 1024
