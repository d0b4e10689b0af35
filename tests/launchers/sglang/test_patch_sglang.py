"""The bf16 index-K patch applied to SGLang 0.5.23's real modules, on the CPU.

SGLang's pool, pool configurator, compressor and indexer modules import on a CPU machine (see
conftest: torchvision is an import-only placeholder where no matching build exists). What cannot run here
is SGLang's CUDA code around the patched functions (the compressor's `compress_forward` JIT kernel, the
DeepGEMM logits, the real attention backend); those call sites are checked by inspecting SGLang's code
objects instead, and the tests say so in their names. The Triton kernels run in the interpreter.
"""

from __future__ import annotations

import importlib
import inspect
from types import SimpleNamespace

import pytest
import torch

from launchers.sglang import bf16_index_k
from launchers.sglang.kernels import layout
from launchers.sglang.kernels import reference as ref
from launchers.sglang.kernels.paged_logits import paged_mqa_logits
from launchers.sglang.kernels.store import store_index_k
from launchers.sglang.refusal import PatchRefused

pytestmark = pytest.mark.sglang


def _mod(name: str):
    return importlib.import_module(name)


def test_refuses_another_sglang_version_in_one_line() -> None:
    with pytest.raises(PatchRefused) as refused:
        bf16_index_k.check_version("0.5.24")
    message = str(refused.value)
    assert "\n" not in message and "0.5.23" in message and "0.5.24" in message and "fp8" in message


def test_check_command_passes_on_sglang_0_5_23_and_leaves_it_unpatched(sglang_available, capsys) -> None:
    assert bf16_index_k.main(["--check"]) == 0
    assert "targets checked" in capsys.readouterr().out
    pool_mod = _mod(bf16_index_k.POOL)
    assert pool_mod.get_dsv4_indexer_bytes_per_token(128, False) == 132


def test_every_target_exists_with_the_expected_signature(sglang_available) -> None:
    for target in bf16_index_k.TARGETS:
        bf16_index_k.check_target(target, _mod(target.module))


def test_signature_drift_is_refused(sglang_available, monkeypatch) -> None:
    indexer = _mod(bf16_index_k.INDEXER)
    monkeypatch.setattr(indexer, "iter_row_chunks", lambda num_rows: iter(()))
    with pytest.raises(PatchRefused, match=r"iter_row_chunks takes \(num_rows\), expected"):
        bf16_index_k.patch_module(indexer)
    assert not hasattr(indexer.C4IndexerBackendMixin.forward_c4_indexer, bf16_index_k.MARK)


def test_compressor_call_site_checked_by_inspecting_code_since_compress_forward_needs_cuda(
    sglang_available, monkeypatch
) -> None:
    compressor = _mod(bf16_index_k.COMPRESSOR)
    caller = compressor.CompressorBackendMixin._forward_compress_all_in_one
    assert "compress_norm_rope_store" in caller.__code__.co_names  # SGLang calls it through the module global

    def drifted(self, *, kv_score_buffer, **kwargs):  # a caller that no longer goes through the global
        return None

    monkeypatch.setattr(compressor.CompressorBackendMixin, "_forward_compress_all_in_one", drifted)
    with pytest.raises(PatchRefused, match="no longer calls compress_norm_rope_store"):
        bf16_index_k.patch_module(compressor)


def _indexer_pool(pool_mod, pages: int = 20):
    return pool_mod.DeepSeekV4IndexerPool(
        pages * 64 - 256,
        64,
        torch.bfloat16,
        128,
        2,
        "cpu",
        False,
        use_fp4_indexer=False,
        global_page_size=256,
    )


def test_pool_allocates_bf16_pages_and_says_so(sglang_available, capsys) -> None:
    pool_mod = _mod(bf16_index_k.POOL)
    assert _indexer_pool(pool_mod).index_k_with_scale_buffer[0].shape[1] == 64 * 132
    modules = bf16_index_k.apply()
    try:
        pool = _indexer_pool(pool_mod)
        assert pool.get_bytes_per_token() == 256
        assert pool.index_k_with_scale_buffer[0].shape[1] == 64 * 256
        assert "bf16 index keys active" in capsys.readouterr().err
        with pytest.raises(PatchRefused, match="fp8 index-K layout"):
            pool.get_index_k_scale_buffer(0, None, None, 0, 0)
    finally:
        for module in modules:
            bf16_index_k.unpatch_module(module)
    assert _indexer_pool(pool_mod).index_k_with_scale_buffer[0].shape[1] == 64 * 132


def test_memory_planner_budgets_256_bytes_and_fp4_pools_keep_theirs(bf16_patch) -> None:
    configurator = _mod(bf16_index_k.CONFIGURATOR)
    assert configurator.get_dsv4_indexer_bytes_per_token(128, False) == 256
    assert configurator.get_dsv4_indexer_bytes_per_token(128, True) == 68


def test_pd_layout_string_tells_bf16_and_fp8_peers_apart(sglang_available) -> None:
    pool_mod = _mod(bf16_index_k.POOL)
    kv_pool = pool_mod.DeepSeekV4TokenToKVPool.__new__(pool_mod.DeepSeekV4TokenToKVPool)
    kv_pool.uniform_fp8 = True  # the shortest branch of SGLang's pd_kv_layout
    fp8_peer = kv_pool.pd_kv_layout()
    modules = bf16_index_k.apply()
    try:
        bf16_peer = kv_pool.pd_kv_layout()
    finally:
        for module in modules:
            bf16_index_k.unpatch_module(module)
    # SGLang's PD handshake raises "KV layout mismatch" when the two strings differ
    assert bf16_peer == fp8_peer + ",index_k:bf16"
    assert "info.kv_layout != self.kv_layout" in inspect.getsource(
        _mod("sglang.srt.disaggregation.common.conn")
    )


def _freqs(max_pos: int, gen: torch.Generator) -> torch.Tensor:
    angles = torch.rand(max_pos, 32, generator=gen) * 6.2832
    return torch.polar(torch.ones_like(angles), angles)  # complex, as the compressor holds freqs_cis


@pytest.mark.parametrize("decode", [False, True], ids=["prefill-plan", "decode-plan"])
def test_sglang_compressor_store_entry_point_writes_bf16_keys(bf16_patch, decode: bool) -> None:
    compress = _mod("sglang.kernels.ops.attention.dsv4.compress")
    compressor = _mod(bf16_index_k.COMPRESSOR)
    pool = _indexer_pool(_mod(bf16_index_k.POOL))
    gen = torch.Generator().manual_seed(3)
    rows = 20
    kv = (torch.randn(rows, 128, generator=gen) * 2).bfloat16()
    norm_weight = torch.rand(128, generator=gen) + 0.5  # fp32, as the compressor's RMSNorm keeps it
    freqs = _freqs(4096, gen)
    words = torch.zeros(rows, 4, dtype=torch.int32)
    words[:, 0] = torch.randint(1, 1000, (rows,), generator=gen) * 4
    slots = torch.randperm(pool.size, generator=gen)
    if decode:
        words[::4, 0] += 2  # mid-block rows: nothing to store
        out_loc, plan = slots[:rows], compress.CompressorDecodePlan(4, words.view(torch.uint8).view(rows, 16))
    else:
        words[::5, 0] = -1  # invalid rows
        words[:, 1] = torch.arange(rows) * 2
        out_loc = slots[: rows * 2]
        plan = compress.CompressorPrefillPlan(4, words.view(torch.uint8).view(rows, 16), torch.zeros(rows, 8))
    buffer = pool.get_index_k_with_scale_buffer(0)
    buffer.fill_(0xFF)
    compressor.compress_norm_rope_store(
        kv, plan, norm_weight=norm_weight, norm_eps=1e-6, freq_cis=freqs, out_loc=out_loc,
        kvcache=buffer.view(torch.uint8), page_size=pool.page_size, use_fp4=False, bf16_store=False,
    )  # fmt: skip
    keep, slot, pos = ref.plan_targets(plan[1], decode, 4, out_loc)
    freqs_real = torch.view_as_real(freqs).flatten(-2)
    exact = ref.norm_rope_hadamard(kv[keep], norm_weight.bfloat16(), 1e-6, freqs_real, pos[keep])
    got = ref.load_keys(buffer, slot[keep])
    assert 0 < int(keep.sum()) < rows
    assert ((got.double() - exact).abs() <= exact.abs() * 2**-8 + 1e-6).all()
    rows_of_slots = buffer.view(-1, 256)  # one 256-byte row per slot, pages back to back
    untouched = torch.ones(rows_of_slots.shape[0], dtype=torch.bool)
    untouched[slot[keep]] = False
    assert (rows_of_slots[untouched] == 0xFF).all()


def test_fp8_pages_from_our_store_read_the_same_through_sglangs_torch_reader(sglang_available) -> None:
    """Our fp8 store writes SGLang's byte layout: SGLang's own fp8_paged_mqa_logits_torch reads it back
    to the logits our paged kernel computes."""
    indexer = _mod(bf16_index_k.INDEXER)
    gen = torch.Generator().manual_seed(4)
    pool = layout.new_pool(12, "fp8")
    store_index_k(torch.randn(12 * 64, 128, generator=gen), torch.arange(12 * 64), pool)
    table = torch.randperm(12, generator=gen).int().view(2, 6)
    lens = torch.tensor([300, 384], dtype=torch.int32)
    q = torch.randn(2, 1, 16, 128, generator=gen).to(torch.float8_e4m3fn)
    w = torch.randn(2, 16, generator=gen)
    theirs = indexer.fp8_paged_mqa_logits_torch(
        q, pool.view(12, 64, 1, 132), w, lens, table, None, 384, False
    )
    ours = paged_mqa_logits(q, pool.view(12, 64, 1, 132), w, lens, table, None, 384)
    for r, n in enumerate(lens.tolist()):
        scale = theirs[r, :n].abs().max()
        assert ((ours[r, :n] - theirs[r, :n]).abs() <= 2e-2 * scale).all()  # SGLang's torch path is bf16


def _backend(pool, q8, weights, page_table, seq_lens, rows: int, topk: int):
    dsa_topk = _mod("sglang.srt.layers.attention.dsa.dsa_topk_backend")
    metadata = _mod("sglang.srt.layers.attention.dsv4.metadata")
    indexer_metadata = metadata.PagedIndexerMetadata(
        page_size=256,
        compressed_page_size=64,
        page_table=page_table,
        compressed_seq_lens=seq_lens,
        use_topk_v2=False,
    )
    core = SimpleNamespace(
        positions=torch.arange(rows),
        c4_sparse_page_indices=torch.full((rows, topk), -7, dtype=torch.int32),
        c4_sparse_raw_indices=torch.full((rows, topk), -7, dtype=torch.int32),
    )

    def prepare(**kwargs):
        return q8[: kwargs["x"].shape[0]], weights[: kwargs["x"].shape[0], :, None]

    return SimpleNamespace(
        token_to_kv_pool=pool,
        forward_metadata=SimpleNamespace(indexer_metadata=indexer_metadata, core_metadata=core),
        _forward_prepare_normal=prepare,
        dsa_topk_backend=dsa_topk.DSATopKBackend.TORCH,
        debug_use_external_c4_sparse_indices=False,
        hisparse_coordinator=None,
    )


@pytest.mark.parametrize("mode", ["DECODE", "EXTEND"])
def test_indexer_forward_selects_the_exact_top_k_through_sglangs_top_k(
    bf16_patch, monkeypatch, mode: str
) -> None:
    """SGLang's C4 indexer entry point, patched: q/weights from a stand-in backend (SGLang's q kernel
    needs CUDA), bf16 pages in a real DeepSeekV4IndexerPool, our logits (paged for decode, ragged for the
    prefill), SGLang's real torch top-k transform. The selected slots must be the exact top-k."""
    monkeypatch.setenv("SGLANG_FP8_PAGED_MQA_LOGITS_TORCH", "1")  # no DeepGEMM schedule on a CPU
    indexer = _mod(bf16_index_k.INDEXER)
    pool = _indexer_pool(_mod(bf16_index_k.POOL), pages=24)
    gen = torch.Generator().manual_seed(5)
    topk, heads = 64, 16
    keys = torch.randn(24 * 64, 128, generator=gen)
    store_index_k(keys, torch.arange(24 * 64), pool.get_index_k_with_scale_buffer(0))
    if mode == "DECODE":
        lens = [700, 40, 1000]
        tables = torch.stack([torch.randperm(24, generator=gen)[:16] for _ in lens]).int()
        extend_lens = None
    else:
        lens = [500 + t for t in range(6)] + [30 + t for t in range(4)]
        first, second = torch.randperm(24, generator=gen)[:16], torch.randperm(24, generator=gen)[:16]
        tables = torch.stack([first] * 6 + [second] * 4).int()
        extend_lens = [6, 4]
    rows = len(lens)
    q8 = torch.randn(rows, heads, 128, generator=gen).to(torch.float8_e4m3fn)
    weights = torch.randn(rows, heads, generator=gen)
    seq_lens = torch.tensor(lens, dtype=torch.int32)
    backend = _backend(pool, q8, weights, tables, seq_lens, rows, topk)
    forward_mode = getattr(indexer.ForwardMode, mode)
    batch = SimpleNamespace(forward_mode=forward_mode, extend_seq_lens_cpu=extend_lens)
    c4 = SimpleNamespace(layer_id=0, use_fp4_indexer=False)
    x = torch.zeros(rows, 8)
    indexer.C4IndexerBackendMixin.forward_c4_indexer(backend, x, x, c4, batch)

    selected = backend.forward_metadata.core_metadata.c4_sparse_page_indices
    for r, n in enumerate(lens):
        slots = ref.slots_of(tables[r], n)
        scores = ref.index_scores(
            q8[r : r + 1].float(), weights[r : r + 1], ref.stored_precision(keys[slots], "bf16")
        )[0]
        want = set(slots[scores.topk(min(topk, n)).indices].tolist())
        got = set(selected[r].tolist()) - {-1}
        assert len(got & want) >= min(topk, n) - 1, f"row {r}: {len(got & want)} of {min(topk, n)}"


def test_indexer_forward_refuses_the_fp4_indexer_in_one_line(bf16_patch) -> None:
    indexer = _mod(bf16_index_k.INDEXER)
    backend = SimpleNamespace(hisparse_coordinator=None)
    batch = SimpleNamespace(forward_mode=indexer.ForwardMode.DECODE)
    with pytest.raises(PatchRefused, match="exclusive") as refused:
        indexer.C4IndexerBackendMixin.forward_c4_indexer(
            backend, None, None, SimpleNamespace(use_fp4_indexer=True), batch
        )
    assert "\n" not in str(refused.value)
