"""fp4 index keys: the bytes the reference engine stores equal SGLang 0.5.23's own quantizer's, every slot.

SGLang's Triton kernels (`quantize_fp4_indexer_tensor`, `store_fp4_index_k_cache`) run on CPU
tensors under TRITON_INTERPRET=1, in a child process (tests/launchers/dsa/sglang_fp4.py).
Its DeepSeek-V4 c4 pool stores with `rne=False` (threshold rounding: ties go to the smaller
magnitude); rows built to land exactly on every e2m1 boundary prove that the rounding mode, not only
the grid, matches, and that they would not match under the other mode.
"""

from __future__ import annotations

from pathlib import Path

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


@pytest.fixture
def sglang(tmp_path: Path):
    """Calls SGLang's kernels: sglang(requests) -> results (skips, or fails in CI, without sglang)."""
    if not prerequisites.sglang_installed():
        prerequisites.missing("sglang", "sglang is not installed (pip install --no-deps sglang==0.5.23)")
    return lambda requests: sglang_fp4.call(requests, tmp_path)


def _as_bytes(result: tuple[torch.Tensor, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
    """quantize_fp4_indexer_tensor's (int8 codes, packed int32 exponents) as uint8 codes, exponents."""
    codes, packed = result
    exponents = (
        packed.contiguous().view(torch.uint8).view(-1, fp4.SCALE_BYTES)
    )  # little-endian: block 0 first
    return codes.view(torch.uint8), exponents


def _rows_with_ties(seed: int) -> torch.Tensor:
    """Rows whose every block's scale is 2^e exactly and whose values sit on the e2m1 boundaries
    (both signs), zero, the maximum, and random values between them."""
    g = torch.Generator().manual_seed(seed)
    rows = []
    for exponent in (-7, -1, 0, 3):
        scale = 2.0**exponent
        grid = torch.tensor([*BOUNDARIES, *(-b for b in BOUNDARIES), 0.0, -0.0, 6.0], dtype=torch.float32)
        filler = (torch.rand(128, generator=g) * 12 - 6).clamp(-6, 6)
        row = filler.clone()
        for block in range(4):
            row[block * 32 : block * 32 + len(grid)] = grid
            row[block * 32 + 31] = 6.0  # amax = 6 * scale: the block's scale is exactly `scale`
        rows.append(row * scale)
    return torch.stack(rows)


def _random_rows(seed: int, n: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    magnitudes = 10.0 ** (torch.rand(n, 4, 1, generator=g) * 8 - 5)  # blocks from 1e-5 to 1e3
    x = torch.randn(n, 4, 32, generator=g) * magnitudes
    x[0] = 0.0  # an all-zero row takes the scale floor
    return x.flatten(1)


@pytest.mark.parametrize("seed", [0, 1])
def test_quantizer_bytes_equal_sglangs(seed: int, sglang) -> None:
    """Codes and exponents of random rows (scales over 8 decades, a zero row), of rotated keys and
    of rows on every rounding boundary equal quantize_fp4_indexer_tensor(rne=False)'s, byte for byte."""
    g = torch.Generator().manual_seed(seed)
    x = torch.cat([_random_rows(seed, 40), rotate(torch.randn(16, 128, generator=g)), _rows_with_ties(seed)])
    ours_codes, ours_exp = fp4.quantize_rows_e2m1(x)
    (result,) = sglang([{"op": "quantize", "x": x, "rne": False}])
    ref_codes, ref_exp = _as_bytes(result)
    assert torch.equal(ours_exp, ref_exp)
    assert torch.equal(ours_codes, ref_codes)


def test_rounding_mode_is_sglangs_threshold_rounding(sglang) -> None:
    """On boundary rows SGLang's two modes differ, and ours is the c4 pool's (rne=False), not RNE."""
    x = _rows_with_ties(7)
    ours, _ = fp4.quantize_rows_e2m1(x)
    results = sglang([{"op": "quantize", "x": x, "rne": False}, {"op": "quantize", "x": x, "rne": True}])
    (threshold, _), (nearest_even, _) = (_as_bytes(r) for r in results)
    assert not torch.equal(threshold, nearest_even)
    assert torch.equal(ours, threshold)


def test_engine_pool_bytes_equal_sglangs_store(sglang) -> None:
    """A real prefill and decode of the reference engine with fp4 index keys: the whole index-K
    buffer of each DSA layer equals what SGLang's store_fp4_index_k_cache writes for the same keys
    at the same slots (64-slot pages, 68 bytes per slot), and reading a slot back gives the keys."""
    engine = ReferenceEngine(EngineSettings(index_k_dtype="fp4", context_length=1024, threads=1))
    written: list[tuple[int, torch.Tensor, torch.Tensor]] = []
    runner_write = engine.runner._write_index_keys

    def record(layer: int, pages: torch.Tensor, keys: torch.Tensor) -> None:
        written.append((layer, pages.clone(), keys.clone()))
        runner_write(layer, pages, keys)

    engine.runner._write_index_keys = record  # type: ignore[method-assign]
    text = "The vault code is 4471. " + "Plain filler text goes on and on. " * 40 + "What is the vault code?"
    prompt = engine.encode(engine.chat_prompt([{"role": "user", "content": text}]))
    steps = list(engine.generate(prompt, max_new_tokens=9, ignore_eos=True))
    assert len(steps) == 9
    layers = engine.model.cfg.n_dsa_layers
    decode_writes = [w for w in written if len(w[1]) == 1]
    assert decode_writes, "decode completed no block: the append path was not checked"
    requests = [
        {
            "op": "store",
            "cache": torch.zeros_like(engine.pool.index_k[layer]),
            "page_size": fp4.PAGE_SLOTS,
            "writes": [(k.reshape(-1, 128), p.to(torch.int64)) for li, p, k in written if li == layer],
        }
        for layer in range(layers)
    ]
    for layer, expected in enumerate(sglang(requests)):
        assert torch.equal(engine.pool.index_k[layer], expected), f"DSA layer {layer}"
    layer, pages, keys = written[0]
    codes, exponent = fp4.read_slots(engine.pool.index_k[layer], pages)
    assert torch.equal(fp4.dequantize_rows_e2m1(codes, exponent), fp4.fake_quantize_e2m1(keys))


def test_fp4_logits_are_from_dequantised_keys_and_queries(sglang) -> None:
    """index_logits with fp4 keys: sum_h w_h ReLU(q4_h . k4) with k4 the dequantised stored keys and
    q4 the bf16-rounded queries through the same quantizer (SGLang's fp4 q kernel), in fp32; the
    dequantised keys are SGLang's own bytes decoded."""
    g = torch.Generator().manual_seed(5)
    q = rotate(torch.randn(1, 3, 8, 128, generator=g))
    w = torch.randn(1, 3, 8, generator=g) * 0.03
    k = rotate(torch.randn(1, 50, 128, generator=g))
    stored = store_keys(k, "fp4")
    assert stored.data.dtype == torch.uint8 and stored.data.shape == (1, 50, 64)
    (result,) = sglang([{"op": "quantize", "x": k[0], "rne": False}])
    ref_codes, ref_exp = _as_bytes(result)
    k4 = fp4.dequantize_rows_e2m1(ref_codes, ref_exp)
    q4 = fp4.fake_quantize_e2m1(q.to(torch.bfloat16))
    expected = torch.einsum("bqhd,nd->bqhn", q4, k4).relu().mul(w.unsqueeze(-1)).sum(2)
    got = index_logits(q, w, stored)
    torch.testing.assert_close(got, expected, rtol=1e-6, atol=1e-6)
    assert not torch.allclose(got, index_logits(q, w, StoredKeys("fp32", k)), rtol=1e-3, atol=0)
