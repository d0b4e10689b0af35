"""Indexer coverage: did the DSA indexer select the needle where the answer was produced, and why a miss.

What SGLang 0.5.23 returns (paths under sglang/srt/, read in the 0.5.23 source)
--------------------------------------------------------------------------------
Transport. With ``--enable-return-indexer-topk`` a capturer exists (state_capturer/indexer_topk.py:91-119;
it is CUDA/NPU only, and needs attention TP size 1, i.e. DP attention when tp > 1: indexer_topk.py:33).
Every indexer call passes its result through ``maybe_capture_indexer_topk(layer_id, topk)``
(indexer_topk.py:65-77), which copies it into a device buffer ``(batch_tokens, num_indexer_layers,
index_topk)`` int32 (state_capturer/base.py:38-50). After each forward pass the rows are copied to a
host buffer ``(num_kv_slots, layers, topk)`` at the KV slot of the token each row was computed for
(base.py:201-220; the host buffer starts zeroed, base.py:75). When a request finishes,
``get_topk`` gathers the rows of ``req_to_token[req][0 : seqlen - 1]`` (base.py:173-188) with
``seqlen = len(origin_input_ids) + len(output_ids_through_stop)``
(managers/scheduler_components/batch_result_processor.py:181-190). The detokenizer encodes the
tensor as base64 of its raw int32 bytes (managers/detokenizer_manager.py:432-448, 467) and the
tokenizer manager puts that string in ``meta_info["indexer_topk"]`` of the final response
(managers/tokenizer_manager.py:2610-2615). ``extract_indexer_topk_from_meta_info``
(indexer_topk.py:80-88) decodes it to a flat int32 array; the caller reshapes it to
``(seqlen - 1, num_indexer_layers, index_topk)``.

Rows. Row ``i`` is the selection made by the query at token position ``i`` of the request, i.e. the
forward pass that produced token ``i + 1``: row ``P - 1`` (P = prompt tokens) produced the first
output token, row ``P - 1 + j`` produced output token ``j``. The last output token is never fed back,
hence ``seqlen - 1`` rows. Rows are request-relative in order; prompt rows served from the prefix
cache hold what the request that computed them captured (same tokens, same positions).

Layers. DeepSeek-V3.2 (DSA): one slot per transformer layer, ``num_hidden_layers``
(configs/model_config.py:548-563); layers that reuse the previous layer's top-k mirror it into their
own slot (models/deepseek_common/attention_forward_methods/forward_mla.py:389-394). DeepSeek-V4: one
slot per layer with ``compress_ratio == 4`` (the C4 layers with a lightning indexer), numbered in
layer order (mem_cache/deepseek_v4_memory_pool.py:1839-1841).

Entries, V3.2 (DSA, layers/attention/dsa/). The captured tensor is what ``metadata.topk_transform``
returned (dsa_indexer.py:1450, 1620, 1697, captured at 2246-2247); SGLang warns that it "may not be
the topk indices" (dsa_indexer_metadata.py:84-94). With the default ``SGLANG_DSA_FUSE_TOPK=1``
(environ.py:1978) the transform is fused: decode (PAGED) returns **physical KV slots** of a
page_size=1 table, ``page_table[p // page] * page + p % page`` (dsa_topk_backend.py:123-133,
318-328; the legacy kernels at 187-224 likewise), and prefill returns slots too, or offsets into
the batch's ragged KV buffer when the KV cache is fp8 with a flashmla_sparse prefill
(dsa_backend.py:4108-4124, dsa_topk_backend.py:142-152). Physical slots cannot be mapped back to
token positions without the request's page table, which is not returned (SGLang's own note:
dsa_indexer.py:731-737). With ``SGLANG_DSA_FUSE_TOPK=0`` the transform is skipped at capture time
(dsa_topk_backend.py:109-110): entries are **token positions within the request** (``_topk_unfused``
subtracts the row start, dsa_topk_backend.py:272-309), ``-1`` where fewer than index_topk tokens
exist; the attention backend maps them to slots afterwards (dsa_backend.py:2292-2327). When the
sequence is no longer than index_topk every position is selected (dsa_indexer.py:846-856, 1785-1805).
On NPU, V3.2 entries are token positions (the lightning indexer gets the block table and the sparse
attention applies it again: layers/attention/dsa/dsa_npu_indexer.py:338-353,
hardware_backend/npu/modules/deepseek_v2_attention_mla_npu.py:521). SGLang's KV allocator never hands
out slot 0 (mem_cache/allocator/token.py:43, allocator/paged.py:396), which is how we tell the two
apart on a short probe prompt (every position selected: {0..P-1} are positions, slots never include 0).

Entries, V4 (layers/attention/dsv4/indexer.py). The capturer gets ``raw_indices`` (928-940,
1147-1151), the pre-page-table top-k: **compressed-block indices within the request**, block ``c``
summarising tokens ``4c .. 4c+3``, ``-1`` where fewer blocks exist (the torch reference at
300-360 shows the masking). The C4 compressor overlaps: entry ``c`` also mixes the block before it
(dsv4/compressor.py:59-61; its state holds ``seq_len % 4 + 4`` tokens,
mem_cache/deepseek_v4_compress_state.py:99), so a needle token ``p`` lives in entries ``p // 4`` and
``p // 4 + 1``. The NPU V4 backend captures the same compressed positions (its sparse attention maps
them through ``cmp_block_table`` itself: hardware_backend/npu/attention/ascend_dsv4_backend.py:873-906,
2197-2200). V4 queries also see a 128-token sliding window of uncompressed tokens.

The reference engine (launchers/reference) returns the V4 format: compressed-block indices, block
``b`` = tokens ``4b .. 4b+3``, no overlap, ``-1`` padded; rows of prompt positions other than the
last are ``-1`` (it computes the DSA stack only there); every query also attends its local window
(block-aligned: see launchers/dsa/topk.py), whose blocks are never candidates.

The rule
--------
Answer-producing positions: the last prompt token ``P - 1`` and, for each output token ``j`` of the
answer, the position ``P - 1 + j`` that produced it. For a pass, the answer tokens are the output
tokens whose text overlaps the first occurrence of the expected value after any thinking (placed
through the streamed chunks' text); for any other answer, every output token (the value should have been there).

The needle is *attended* at a position in a layer when that layer's selection holds an entry that
covers one of the needle's tokens (``Case.needle_token_offset .. needle_token_end``, mapped to
blocks where entries are blocks), or when the needle reaches into the query's local window (which
the attention sees without any selection, so the indexer cannot lose it there).

``IndexerCoverage.layers[l]`` = share of answer-producing positions at which layer ``l`` attended the
needle; ``last_prompt_token[l]`` = whether it did at position ``P - 1``. A layer *selected* the needle
when its share is at least ``SELECTED_SHARE`` (one half). A miss (any answered case that did not
pass: miss, empty or truncated) has cause ``generation`` when *most* indexer layers, strictly more
than half of them, selected the needle, and ``selection`` otherwise.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from recall_eval.errors import UserError
from recall_eval.types import IndexerCoverage, MissCause, Outcome

IndexKind = Literal["token", "block", "slot"]
SELECTED_SHARE = 0.5  # a layer selected the needle at >= this share of answer-producing positions
NON_PASS_ANSWERS: tuple[Outcome, ...] = ("miss", "empty", "truncated")


class IndexerDataError(UserError):
    """meta_info.indexer_topk does not have the shape the server's layout says."""


@dataclass(frozen=True)
class IndexerLayout:
    """How to read one server's meta_info.indexer_topk."""

    n_layers: int  # num_indexer_layers
    index_topk: int  # entries per row and layer
    kind: IndexKind  # token positions, compressed blocks, or physical KV slots (unmappable)
    tokens_per_entry: int = 1  # 4 for compressed blocks
    overlap_entries: int = 0  # V4's C4 entry c also covers block c - 1: a token sits in c and c + 1
    local_window: int = 0  # tokens up to the query that its attention always sees (0: none)
    window_align: int = 1  # the local window starts on a multiple of this (reference: the block size)
    source: str = ""  # where the layout came from, for run.json

    @property
    def row_values(self) -> int:
        return self.n_layers * self.index_topk


def decode_indexer_topk(encoded: str, layout: IndexerLayout) -> np.ndarray:
    """base64 int32 bytes -> (rows, n_layers, index_topk), as extract_indexer_topk_from_meta_info + reshape."""
    try:
        raw = base64.b64decode(encoded.encode("ascii"), validate=True)
    except (binascii.Error, UnicodeEncodeError, ValueError) as err:
        raise IndexerDataError(
            f"meta_info.indexer_topk is not base64 ({err}); is this an SGLang server?"
        ) from err
    if len(raw) % 4:
        raise IndexerDataError(
            f"meta_info.indexer_topk has {len(raw)} bytes, not a whole number of int32 values"
        )
    flat = np.frombuffer(raw, dtype="<i4")
    if flat.size % layout.row_values:
        raise IndexerDataError(
            f"meta_info.indexer_topk has {flat.size} values, not a multiple of num_indexer_layers x index_topk "
            f"= {layout.n_layers} x {layout.index_topk} ({layout.source}); set index_topk to the server's value"
        )
    return flat.reshape(-1, layout.n_layers, layout.index_topk)


def needle_entries(start: int, end: int, layout: IndexerLayout) -> tuple[int, int]:
    """Entries [lo, hi) that cover a needle of tokens [start, end)."""
    if layout.kind == "slot":
        raise ValueError("physical KV slots cannot be mapped to token positions without the page table")
    size = layout.tokens_per_entry
    return start // size, (end - 1) // size + 1 + layout.overlap_entries


def window_start(position: int, layout: IndexerLayout) -> int:
    """First token of the query's local window (the query position + 1 when there is none)."""
    if layout.local_window <= 0:
        return position + 1
    align = max(1, layout.window_align)
    return align * (max(0, position - layout.local_window + 1) // align)


def attended(
    topk: np.ndarray, positions: Sequence[int], needle: tuple[int, int], layout: IndexerLayout
) -> np.ndarray:
    """bool (len(positions), n_layers): the needle was selected, or lies in the local window."""
    start, end = needle
    lo, hi = needle_entries(start, end, layout)
    rows = topk[np.asarray(positions, dtype=np.int64)]  # (Q, L, K)
    selected = ((rows >= lo) & (rows < hi)).any(axis=-1)
    windowed = np.array([end - 1 >= window_start(p, layout) for p in positions], dtype=bool)
    return selected | windowed[:, None]


def answer_tokens(
    raw_text: str, marks: Sequence[tuple[int, int]], expected: Sequence[str], n_output: int, passed: bool
) -> range:
    """Output token indices of the answer (see the module docstring).

    marks: per streamed chunk, (output tokens so far, characters of generated text so far).
    """
    everything = range(n_output)
    if not passed:
        return everything
    lowered = raw_text.lower()
    think_end = lowered.rfind("</think>")
    after = think_end + len("</think>") if think_end >= 0 else 0  # the scored answer follows any thinking
    hits = [(lowered.find(v.lower(), after), len(v)) for v in expected if v]
    found = [(at, length) for at, length in hits if at >= 0]
    if not found or not marks:
        return everything
    char_start, length = min(found)
    char_end = char_start + length
    first = max((tokens for tokens, chars in marks if chars <= char_start), default=0)
    last = min((tokens for tokens, chars in marks if chars >= char_end), default=n_output)
    return range(min(first, n_output), max(min(last, n_output), min(first, n_output) + 1))


def indexer_coverage(
    topk: np.ndarray,
    layout: IndexerLayout,
    prompt_tokens: int,
    answer: range,
    needle: tuple[int, int],
) -> IndexerCoverage:
    """Per-layer coverage of the needle at the answer-producing positions (no cause yet)."""
    last = prompt_tokens - 1
    if topk.shape[0] <= last:
        raise IndexerDataError(
            f"meta_info.indexer_topk has {topk.shape[0]} rows but the prompt has {prompt_tokens} tokens; "
            f"the row of the last prompt token is missing"
        )
    produced = {last} | {last + j for j in answer if last + j < topk.shape[0]}
    positions = sorted(produced)
    hits = attended(topk, positions, needle, layout)
    shares = hits.mean(axis=0)
    at_last = hits[positions.index(last)]
    return IndexerCoverage(
        layers=tuple(round(float(s), 6) for s in shares),
        last_prompt_token=tuple(bool(v) for v in at_last),
    )


def layers_selected(coverage: IndexerCoverage) -> int:
    return sum(share >= SELECTED_SHARE for share in coverage.layers)


def miss_cause(coverage: IndexerCoverage) -> MissCause:
    """generation when strictly more than half of the indexer layers selected the needle, else selection."""
    return "generation" if 2 * layers_selected(coverage) > len(coverage.layers) else "selection"


def with_cause(coverage: IndexerCoverage, outcome: Outcome) -> IndexerCoverage:
    """The coverage with its cause set for an answered non-pass, cleared otherwise."""
    cause = miss_cause(coverage) if outcome in NON_PASS_ANSWERS else None
    return coverage.model_copy(update={"cause": cause})
