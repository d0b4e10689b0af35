"""A study cell's memory plan: the reference engine's pool as the engine itself allocates it, the fit
rules (prompt against context and pool, the memory cap), and SGLang's DeepSeek-V4 plan at the longest
request."""

from __future__ import annotations

import pytest

from launchers.cell_plan import plan_cell
from launchers.profiles import load_profiles
from launchers.reference.config import ModelConfig
from launchers.reference.engine_api import WEIGHTS_DIR
from launchers.reference.kv_pool import KVPool


@pytest.fixture
def profiles(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    return load_profiles()


@pytest.mark.parametrize("dtype", ["fp8", "bf16"])
def test_reference_plan_equals_the_pool_the_engine_allocates(profiles, dtype: str) -> None:
    """KV slots and bytes per token predicted from config.json equal those of the engine's real KVPool
    (allocated here) for the same context; bf16 keys cost more per token than fp8."""
    profile = profiles["reference"].model_copy(update={"index_k_dtype": dtype, "context_length": 2048})
    plan = plan_cell(profile, 1024, 32)
    pool = KVPool(ModelConfig.load(WEIGHTS_DIR / "config.json"), 2048, dtype)  # type: ignore[arg-type]
    assert plan.fits is True and plan.kv_slots == pool.max_total_tokens == 2048
    assert plan.kv_bytes_per_token == pool.kv_bytes_per_token
    assert plan.max_sequences == 2048 // (1024 + 32) and plan.sequence_tokens == 1056
    fp8 = plan_cell(profiles["reference"], 1024, 32)
    bf16 = plan_cell(profiles["reference"].model_copy(update={"index_k_dtype": "bf16"}), 1024, 32)
    assert bf16.kv_bytes_per_token > fp8.kv_bytes_per_token


def test_reference_cells_that_do_not_fit(profiles) -> None:
    """A prompt reaching the context (SGLang's max_req_input_len rule), or weights + pool above the memory
    cap, does not fit, each with the reason in one line."""
    small = plan_cell(profiles["reference"].model_copy(update={"context_length": 512}), 512, 8)
    assert small.fits is False and "512-token prompt does not fit" in small.reason and "ctx=" in small.reason
    edge = plan_cell(profiles["reference"].model_copy(update={"context_length": 512}), 505, 4)
    assert edge.fits is True  # 505 tokens: the longest prompt SGLang takes with a 512-token context
    capped = plan_cell(profiles["reference"].model_copy(update={"memory_limit_gb": 0.05}), 1024, 32)
    assert capped.fits is False and capped.reason.startswith("predicted OOM at start")


def test_sglang_dsv4_plan_at_the_longest_request(profiles) -> None:
    """SGLang's DeepSeek-V4-Flash profile: fits at 65,536 tokens with the planner's slots; at fp8 more
    sequences fit than at bf16; a context below the request does not fit."""
    fp8 = plan_cell(profiles["dsv4-flash"], 65536, 32)
    bf16 = plan_cell(profiles["dsv4-flash"].model_copy(update={"index_k_dtype": "bf16"}), 65536, 32)
    assert fp8.fits and bf16.fits and fp8.max_sequences > bf16.max_sequences > 0
    short = plan_cell(profiles["dsv4-flash"].model_copy(update={"context_length": 4096}), 65536, 32)
    assert short.fits is False and "context" in short.reason
