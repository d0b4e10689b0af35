"""The reference model's math: sliding-window attention, sparse vs dense DSA, the indexer's
training signal, and the engine's incremental path against the full-sequence forward."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from launchers.reference.config import ModelConfig
from launchers.reference.engine_api import WEIGHTS_DIR
from launchers.reference.inference import Runner, SequenceState
from launchers.reference.kv_pool import KVPool
from launchers.reference.layers import band_attention
from launchers.reference.model import ReferenceModel, count_parameters

SMALL = ModelConfig(
    vocab_size=128,
    d_model=64,
    n_heads=2,
    mlp_hidden=96,
    swa_window=16,
    dsa_window=8,
    index_n_heads=2,
    index_head_dim=32,
)


@pytest.mark.parametrize("t", [1, 7, 16, 17, 100])
def test_band_attention_equals_masked_attention(t: int) -> None:
    g = torch.Generator().manual_seed(t)
    q, k, v = (torch.randn(2, 3, t, 8, generator=g) for _ in range(3))
    pos = torch.arange(t)
    mask = (pos[:, None] >= pos[None, :]) & (pos[:, None] - pos[None, :] < 16)
    want = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    assert torch.allclose(band_attention(q, k, v, 16), want, atol=1e-5)


def test_sparse_with_every_block_selected_equals_dense() -> None:
    torch.manual_seed(0)
    model = ReferenceModel(SMALL)
    tokens = torch.randint(0, 128, (2, 90))
    qpos = torch.tensor([[89, 50, 20], [70, 12, 88]])
    dense, _ = model.forward_train(tokens, qpos, None)
    sparse_all, _ = model.forward_train(tokens, qpos, 1000)
    sparse_few, _ = model.forward_train(tokens, qpos, 1)
    assert torch.allclose(dense, sparse_all, atol=1e-5)
    assert not torch.allclose(dense[:, :2], sparse_few[:, :2], atol=1e-4)  # far queries lose blocks
    assert torch.allclose(dense[1, 1], sparse_few[1, 1], atol=1e-5)  # position 12: all inside its window


def test_indexer_learns_only_from_its_kl_term() -> None:
    torch.manual_seed(0)
    model = ReferenceModel(SMALL)
    tokens = torch.randint(0, 128, (2, 64))
    logits, kl = model.forward_train(tokens, torch.tensor([[63, 40], [50, 30]]), 4)
    assert kl.item() >= 0
    kl.backward()
    for name, p in model.named_parameters():
        has_grad = p.grad is not None and bool(p.grad.abs().sum() > 0)
        assert has_grad == (".indexer." in name), name
    model.zero_grad()
    logits.sum().backward()
    assert all(
        p.grad is None or not p.grad.abs().sum() for n, p in model.named_parameters() if ".indexer." in n
    )


@pytest.mark.parametrize("dtype", ["bf16", "fp8"])
def test_engine_decoding_equals_the_full_forward(dtype: str) -> None:
    """Prefill + token-by-token decode through the paged pool (fp32 K/V here, so that the only
    rounding is the index keys') gives the logits of recomputing the whole sequence."""
    model = ReferenceModel.load(WEIGHTS_DIR)
    pool = KVPool(model.cfg, 2048, dtype, kv_dtype=torch.float32)  # type: ignore[arg-type]
    runner = Runner(model, pool)
    prompt = torch.randint(
        10, model.cfg.vocab_size, (700,), generator=torch.Generator().manual_seed(1)
    ).tolist()
    seq = SequenceState(pool.allocate(800))
    runner.prefill(seq, prompt)
    logits, _ = runner.next_logits(seq, 16)
    tokens = list(prompt)
    with torch.no_grad():
        for _ in range(5):
            x, _ = model.swa_stack(torch.tensor([tokens]))
            want, _ = model.dsa_forward(x, torch.tensor([[len(tokens) - 1]]), 16, dtype)  # type: ignore[arg-type]
            assert torch.allclose(logits, want[0, 0], atol=2e-4, rtol=1e-4)
            token = int(logits.argmax())
            tokens.append(token)
            runner.append(seq, token)
            logits, _ = runner.next_logits(seq, 16)


@pytest.mark.parametrize("dtype", ["bf16", "fp8", "fp4"])
def test_decoding_with_kept_fp32_index_keys_equals_reading_the_pool_each_step(dtype: str) -> None:
    """The runner keeps a sequence's index keys as fp32 between decode steps (Runner._candidate_keys):
    the same logits and selections, bit for bit, as reading and converting the stored keys at every
    step, also after a rewind (restore) to before blocks whose keys are then rewritten."""
    model = ReferenceModel.load(WEIGHTS_DIR)
    pool = KVPool(model.cfg, 4096, dtype)  # type: ignore[arg-type]
    runner = Runner(model, pool)

    class Rereading(Runner):
        def _candidate_keys(self, seq, layer, n_blocks):
            return self._read_index_keys(layer, seq.pages[:n_blocks])

    rereading = Rereading(model, pool)
    prompt = torch.randint(
        10, model.cfg.vocab_size, (1500,), generator=torch.Generator().manual_seed(2)
    ).tolist()
    seq = SequenceState(pool.allocate(1600))

    def step(token: int | None) -> tuple[torch.Tensor, torch.Tensor]:
        if token is not None:
            runner.append(seq, token)
        kept = runner.next_logits(seq, 64)
        fresh = rereading.next_logits(seq, 64)
        assert torch.equal(kept[0], fresh[0]) and torch.equal(kept[1], fresh[1])
        return kept

    runner.prefill(seq, prompt)
    logits, _ = step(None)
    snap = seq.snapshot()
    for _ in range(80):  # past the local window: blocks of generated tokens become candidates
        logits, _ = step(int(logits.argmax()))
    assert seq.index_keys_n >= snap[3] + 20  # the kept copies grew with the new blocks
    seq.restore(snap)
    for token in range(20, 100):  # other tokens: the same blocks, other keys
        step(token)


@pytest.mark.parametrize("fault", ["scale_block", "scale_page"])
def test_fp4_scale_faults_still_misread_the_stored_exponents_while_decoding(fault: str) -> None:
    """fp4 keys are kept dequantised between decode steps, except under a scale fault: its logits
    must differ from the correct engine's (the fault reads the stored exponents)."""
    model = ReferenceModel.load(WEIGHTS_DIR)
    pool = KVPool(model.cfg, 4096, "fp4")
    correct, faulty = Runner(model, pool), Runner(model, pool, fault=fault)
    prompt = torch.randint(
        10, model.cfg.vocab_size, (1500,), generator=torch.Generator().manual_seed(3)
    ).tolist()
    seq = SequenceState(pool.allocate(1600))
    correct.prefill(seq, prompt)
    scores_correct: list[torch.Tensor] = []
    scores_faulty: list[torch.Tensor] = []
    correct.next_logits(seq, 64, indexer_scores=scores_correct)
    faulty.next_logits(seq, 64, indexer_scores=scores_faulty)
    assert scores_correct and len(scores_correct) == len(scores_faulty)
    assert not all(torch.equal(a, b) for a, b in zip(scores_correct, scores_faulty, strict=True))


def test_shipped_model_size() -> None:
    model = ReferenceModel.load(WEIGHTS_DIR)
    assert count_parameters(model) <= 20_000_000
    assert model.cfg.index_head_dim == 128
