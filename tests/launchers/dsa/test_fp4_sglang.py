"""fp4 index keys: the bytes the reference engine stores equal SGLang 0.5.23's own quantizer's, every slot.

SGLang's Triton kernels (`quantize_fp4_indexer_tensor`, `store_fp4_index_k_cache`) run on CPU
tensors under TRITON_INTERPRET=1, in one child process for the whole module (importing SGLang costs
seconds; tests/launchers/dsa/sglang_fp4.py). Its DeepSeek-V4 c4 pool stores with `rne=False`
(threshold rounding: ties go to the smaller magnitude); rows built to land exactly on every e2m1
boundary prove that the rounding mode, not only the grid, matches, and that they would not match
under the other mode.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest
import torch

from launchers.dsa import fp4
from launchers.dsa.hadamard import rotate
from launchers.dsa.indexer import StoredKeys, index_logits, store_keys
from launchers.reference.engine import ReferenceEngine
from launchers.reference.engine_api import EngineSettings
from tests import prerequisites
from tests.launchers.dsa import sglang_fp4

pytestmark = pytest.mark.sglang

BOUNDARIES = (0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0)


def _rows_with_ties(seed: int) -> torch.Tensor:
    """Rows whose every block's scale is 2^e exactly and whose values sit on the e2m1 boundaries
    (both signs), zero, the maximum, and random values between them."""
    g = torch.Generator().manual_seed(seed)
    grid = torch.tensor([*BOUNDARIES, *(-b for b in BOUNDARIES), 0.0, -0.0, 6.0], dtype=torch.float32)
    rows = []
    for exponent in (-7, -1, 0, 3):
        row = (torch.rand(128, generator=g) * 12 - 6).clamp(-6, 6)
        for block in range(4):
            row[block * 32 : block * 32 + len(grid)] = grid
            row[block * 32 + 31] = 6.0  # amax = 6 * 2^e: the block's scale is exactly 2^e
        rows.append(row * 2.0**exponent)
    return torch.stack(rows)


def _random_rows(seed: int) -> torch.Tensor:
    """Blocks with scales over 8 decades, an all-zero row (the scale floor), and rotated keys."""
    g = torch.Generator().manual_seed(seed)
    magnitudes = 10.0 ** (torch.rand(40, 4, 1, generator=g) * 8 - 5)
    x = (torch.randn(40, 4, 32, generator=g) * magnitudes).flatten(1)
    x[0] = 0.0
    return torch.cat([x, rotate(torch.randn(16, 128, generator=g))])


@dataclass
class EngineRun:
    """The fp4 index-K buffers a real prefill + decode left in the pool, and every key written."""

    pool: torch.Tensor  # (n_dsa_layers, pages, 64 * 68) uint8
    writes: list[tuple[int, torch.Tensor, torch.Tensor]]  # (layer, slots, rotated fp32 keys)


def _engine_run() -> EngineRun:
    engine = ReferenceEngine(EngineSettings(index_k_dtype="fp4", context_length=1024, threads=1))
    writes: list[tuple[int, torch.Tensor, torch.Tensor]] = []
    runner_write = engine.runner._write_index_keys

    def record(layer: int, pages: torch.Tensor, keys: torch.Tensor) -> None:
        writes.append((layer, pages.clone(), keys.clone()))
        runner_write(layer, pages, keys)

    engine.runner._write_index_keys = record  # type: ignore[method-assign]
    text = "The vault code is 4471. " + "Plain filler text goes on and on. " * 25 + "What is the vault code?"
    prompt = engine.encode(engine.chat_prompt([{"role": "user", "content": text}]))
    assert len(list(engine.generate(prompt, max_new_tokens=9, ignore_eos=True))) == 9
    return EngineRun(engine.pool.index_k.clone(), writes)


@pytest.fixture(scope="module")
def case(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Every input, and SGLang's answer for each from one child process."""
    if not prerequisites.sglang_installed():
        prerequisites.missing("sglang", "sglang is not installed (pip install --no-deps sglang==0.5.23)")
    g = torch.Generator().manual_seed(5)
    inputs: dict[str, Any] = {
        "random": torch.cat([_random_rows(0), _random_rows(1)]),
        "ties": torch.cat([_rows_with_ties(0), _rows_with_ties(7)]),
        "keys": rotate(torch.randn(50, 128, generator=g)),
        "engine": _engine_run(),
    }
    run: EngineRun = inputs["engine"]
    requests = [
        {"op": "quantize", "x": inputs["random"], "rne": False},
        {"op": "quantize", "x": inputs["ties"], "rne": False},
        {"op": "quantize", "x": inputs["ties"], "rne": True},
        {"op": "quantize", "x": inputs["keys"], "rne": False},
    ]
    for layer in range(run.pool.shape[0]):
        requests.append(
            {
                "op": "store",
                "cache": torch.zeros_like(run.pool[layer]),
                "page_size": fp4.PAGE_SLOTS,
                "writes": [(k.reshape(-1, 128), s.to(torch.int64)) for li, s, k in run.writes if li == layer],
            }
        )
    out = sglang_fp4.call(requests, tmp_path_factory.mktemp("sglang_fp4"))
    random, ties, ties_rne, keys = (_as_bytes(r) for r in out[:4])
    return {
        **inputs,
        "sglang": {"random": random, "ties": ties, "ties_rne": ties_rne, "keys": keys},
        "pool": out[4:],
    }


def _as_bytes(result: tuple[torch.Tensor, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
    """quantize_fp4_indexer_tensor's (int8 codes, packed int32 exponents) -> uint8 codes, exponents."""
    codes, packed = result
    exponents = (
        packed.contiguous().view(torch.uint8).view(-1, fp4.SCALE_BYTES)
    )  # little-endian: block 0 first
    return codes.view(torch.uint8), exponents


def test_quantizer_bytes_equal_sglangs(case: dict[str, Any]) -> None:
    """Codes and exponents of random rows (scales over 8 decades, a zero row, rotated keys) and of rows
    on every rounding boundary equal quantize_fp4_indexer_tensor(rne=False)'s, byte for byte."""
    for name in ("random", "ties"):
        codes, exponent = fp4.quantize_rows_e2m1(case[name])
        ref_codes, ref_exp = case["sglang"][name]
        assert torch.equal(exponent, ref_exp), name
        assert torch.equal(codes, ref_codes), name


def test_rounding_mode_is_sglangs_threshold_rounding(case: dict[str, Any]) -> None:
    """On boundary rows SGLang's two modes differ, and ours is the c4 pool's (rne=False), not RNE."""
    ours, _ = fp4.quantize_rows_e2m1(case["ties"])
    threshold, nearest_even = case["sglang"]["ties"][0], case["sglang"]["ties_rne"][0]
    assert not torch.equal(threshold, nearest_even)
    assert torch.equal(ours, threshold) and not torch.equal(ours, nearest_even)


def test_engine_pool_bytes_equal_sglangs_store(case: dict[str, Any]) -> None:
    """A real prefill and decode of the reference engine with fp4 index keys: the whole index-K
    buffer of each DSA layer equals what SGLang's store_fp4_index_k_cache writes for the same keys
    at the same slots (64-slot pages, 68 bytes per slot), and a slot read back gives the keys."""
    run: EngineRun = case["engine"]
    assert any(len(slots) == 1 for _, slots, _ in run.writes), "decode completed no block: append unchecked"
    assert len(case["pool"]) == run.pool.shape[0] == 2
    for layer, expected in enumerate(case["pool"]):
        assert expected.any()
        assert torch.equal(run.pool[layer], expected), f"DSA layer {layer}"
    layer, slots, keys = run.writes[0]
    codes, exponent = fp4.read_slots(run.pool[layer], slots)
    assert torch.equal(fp4.dequantize_rows_e2m1(codes, exponent), fp4.fake_quantize_e2m1(keys))


def test_fp4_logits_are_from_dequantised_keys_and_queries(case: dict[str, Any]) -> None:
    """index_logits with fp4 keys: sum_h w_h ReLU(q4_h . k4) with k4 SGLang's bytes of the keys
    decoded and q4 the bf16-rounded queries through the same quantizer (SGLang's fp4 q kernel), fp32."""
    g = torch.Generator().manual_seed(6)
    q = rotate(torch.randn(1, 3, 8, 128, generator=g))
    w = torch.randn(1, 3, 8, generator=g) * 0.03
    k = case["keys"].unsqueeze(0)
    stored = store_keys(k, "fp4")
    assert stored.data.dtype == torch.uint8 and stored.data.shape == (1, 50, 64)
    k4 = fp4.dequantize_rows_e2m1(*case["sglang"]["keys"])
    q4 = fp4.fake_quantize_e2m1(q.to(torch.bfloat16))
    expected = torch.einsum("bqhd,nd->bqhn", q4, k4).relu().mul(w.unsqueeze(-1)).sum(2)
    got = index_logits(q, w, stored)
    torch.testing.assert_close(got, expected, rtol=1e-6, atol=1e-6)
    assert not torch.allclose(got, index_logits(q, w, StoredKeys("fp32", k)), rtol=1e-3, atol=0)
