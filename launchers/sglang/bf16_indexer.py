"""`forward_c4_indexer` for bf16 index keys: SGLang 0.5.23's C4 indexer with our logits kernels.

It keeps SGLang's own steps (q and weights from `_forward_prepare_*`, which also run the compressor;
row padding; the logits row chunks SGLang's metadata plans; its top-k transforms; top-k capture) and
replaces one: the logits. SGLang views the pool as fp8 pages of 132-byte rows and calls DeepGEMM's
`fp8_paged_mqa_logits`; here the bf16 pages go to `paged_mqa_logits` (decode, CUDA graphs) or, for an
eager prefill, to `ragged_paged_mqa_logits`, which reads each page once per block of query rows.
Configurations that this path does not cover are refused with one line rather than run wrong.
"""

from __future__ import annotations

import itertools
from types import ModuleType
from typing import Any

import torch
import torch.nn.functional as F

from launchers.sglang.kernels.paged_logits import paged_mqa_logits
from launchers.sglang.kernels.ragged_logits import ragged_paged_mqa_logits
from launchers.sglang.refusal import PatchRefused


def _match_rows(tensor: torch.Tensor, rows: int, pad_value: int) -> torch.Tensor:
    """Trim or pad the first dim to `rows`, as SGLang's indexer does with its metadata."""
    if tensor.shape[0] >= rows:
        return tensor[:rows]
    pad = (0, 0) * (tensor.dim() - 1) + (0, rows - tensor.shape[0])
    return F.pad(tensor, pad, value=pad_value)


def _ragged_pieces(extend_lens: list[int], rows: slice) -> tuple[list[int], list[int], int]:
    """Split `rows` into runs of one request each: (first row of each run, cumulative run lengths
    relative to rows.start, longest run)."""
    firsts, cu, longest = [], [0], 0
    for start, end in itertools.pairwise(itertools.accumulate(extend_lens, initial=0)):
        lo, hi = max(start, rows.start), min(end, rows.stop)
        if lo < hi:
            firsts.append(lo)
            cu.append(cu[-1] + hi - lo)
            longest = max(longest, hi - lo)
    return firsts, cu, longest


def _eager_extend_lens(indexer_mod: ModuleType, forward_batch: Any, rows: int) -> list[int] | None:
    """Per-request query rows of a plain eager prefill, or None where the ragged kernel must not be used."""
    forward_mode_cls = indexer_mod.ForwardMode
    lens = forward_batch.extend_seq_lens_cpu
    if (
        forward_batch.forward_mode != forward_mode_cls.EXTEND
        or getattr(forward_batch, "_original_forward_mode", None) is not None
        or getattr(forward_batch, "tbo_parent_token_range", None) is not None
        or lens is None
        or (torch.cuda.is_available() and torch.cuda.is_current_stream_capturing())
        or indexer_mod.is_in_breakable_cuda_graph()
        or indexer_mod.is_in_tc_piecewise_cuda_graph()
    ):
        return None
    lens = [int(n) for n in (lens.tolist() if isinstance(lens, torch.Tensor) else lens)]
    return lens if sum(lens) == rows else None


def _refuse_unsupported(backend: Any, c4_indexer: Any, indexer_mod: ModuleType) -> None:
    if c4_indexer.use_fp4_indexer:
        raise PatchRefused(
            "bf16 index keys and --enable-deepseek-v4-fp4-indexer are exclusive: drop one of them"
        )
    if getattr(backend, "hisparse_coordinator", None) is not None:
        raise PatchRefused("bf16 index keys do not support HiSparse: start the server without it, or use fp8")
    if indexer_mod.is_hip():
        raise PatchRefused("bf16 index keys are built for CUDA GPUs: on ROCm use index_k_dtype=fp8")


def make_forward_c4_indexer(indexer_mod: ModuleType):
    """Bind the replacement to SGLang's indexer module (its top-k functions and helpers)."""

    def forward_c4_indexer(
        self: Any,
        x: torch.Tensor,
        q_lora: torch.Tensor,
        c4_indexer: Any,
        forward_batch: Any,
        alt_streams: Any = None,
        enable_multi_stream: bool = False,
        q_lora_ready: Any = None,
        skip_compressor: bool = False,
        q_lora_quant: Any = None,
    ) -> None:
        if forward_batch.forward_mode.is_idle():
            return
        _refuse_unsupported(self, c4_indexer, indexer_mod)
        pool = self.token_to_kv_pool
        metadata = self.forward_metadata
        im, core = metadata.indexer_metadata, metadata.core_metadata
        positions = core.positions
        n = min(x.shape[0], q_lora.shape[0], positions.shape[0])
        if q_lora.shape[0] != n:
            q_lora_quant = None
        x, q_lora, positions = x[:n], q_lora[:n], positions[:n]
        common = dict(
            x=x, q_lora=q_lora, c4_indexer=c4_indexer, positions=positions, forward_batch=forward_batch
        )
        if enable_multi_stream:
            q, weights = self._forward_prepare_multi_stream(
                **common, alt_streams=alt_streams, q_lora_ready=q_lora_ready
            )
        else:
            assert q_lora_ready is None
            q, weights = self._forward_prepare_normal(
                **common, skip_compressor=skip_compressor, q_lora_quant=q_lora_quant
            )
        weights = weights.squeeze(2)  # [rows, heads], q's scale folded in
        rows = q.shape[0]
        seq_lens = _match_rows(im.compressed_seq_lens, rows, 1)
        page_table = _match_rows(im.page_table, rows, 0)
        sparse_pages = _match_rows(core.c4_sparse_page_indices, rows, -1)
        if self.debug_use_external_c4_sparse_indices:
            return

        capturer = indexer_mod.get_global_indexer_capturer()
        raw = core.c4_sparse_raw_indices
        if raw is None and capturer is not None:
            raw = torch.empty_like(sparse_pages)
        kv_cache = pool.get_index_k_with_scale_buffer(layer_id=c4_indexer.layer_id)
        max_len = im.max_compressed_seq_len
        extend_lens = _eager_extend_lens(indexer_mod, forward_batch, rows)

        def logits_for(part: slice) -> torch.Tensor:
            if extend_lens is None:
                return paged_mqa_logits(
                    q[part].unsqueeze(1),
                    kv_cache,
                    weights[part],
                    seq_lens[part],
                    page_table[part],
                    None,
                    max_len,
                )
            firsts, cu, longest = _ragged_pieces(extend_lens, part)
            device = q.device
            return ragged_paged_mqa_logits(
                q[part],
                kv_cache,
                weights[part],
                seq_lens[part],
                page_table[torch.tensor(firsts, device=device)],
                torch.tensor(cu, dtype=torch.int32, device=device),
                longest,
                max_len,
            )

        def top_k(part: slice, logits: torch.Tensor, plan: Any) -> None:
            args = (logits, seq_lens[part], page_table[part], sparse_pages[part], im.compressed_page_size)
            part_raw = raw[part] if raw is not None else None
            topk = self.dsa_topk_backend
            if topk.is_torch():
                indexer_mod.topk_transform_pytorch_vectorized(*args, part_raw)
            elif topk.is_flashinfer():
                self.flashinfer_topk_transform(*args, part_raw)
            elif topk.should_use_topk_v2():
                if plan is None:
                    plan = (
                        im.topk_metadata
                        if part == slice(0, rows)
                        else indexer_mod.plan_topk_v2(seq_lens[part])
                    )
                indexer_mod.topk_transform_paged_v2(*args, plan, part_raw)
            else:
                indexer_mod.topk_transform_paged(*args, part_raw)

        if isinstance(im.deep_gemm_metadata, list):  # SGLang planned row chunks to bound the logits' memory
            plans = im.topk_metadata_chunks
            parts = indexer_mod.iter_row_chunks(num_rows=rows, rows_per_chunk=im.rows_per_chunk)
            for i, part in enumerate(parts):
                top_k(part, logits_for(part), plans[i] if plans is not None else None)
        else:
            top_k(slice(0, rows), logits_for(slice(0, rows)), None)

        if capturer is not None:
            capturer.capture(pool.layer_mapping[c4_indexer.layer_id].compress_layer_id, raw)

    return forward_c4_indexer
