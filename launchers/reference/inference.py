"""Prefill and decode of one sequence against the paged KV pool (what the engine runs).

Prefill: the sliding-window stack runs over the whole prompt (batched, O(T * window)); its
output gives every DSA layer's K, V and compressed index keys, all written to the pool; the DSA
stack then runs for the last prompt position only, since no other position's DSA output is used.
Decode: every layer runs for the new token, reading the pool.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
import torch.nn.functional as F

from launchers.dsa import fp4
from launchers.dsa.indexer import StoredKeys, index_logits, store_keys
from launchers.dsa.topk import select_topk, window_start
from launchers.reference import faults
from launchers.reference.kv_pool import KVPool
from launchers.reference.layers import rope_tables
from launchers.reference.model import ReferenceModel


@dataclass
class SequenceState:
    pages: torch.Tensor  # page ids of this sequence, in order
    length: int = 0  # tokens written to the pool
    x_last: torch.Tensor | None = None  # SWA-stack output at the last written position (d,)
    # per DSA layer: compressor features (kv, score) of the tokens of the still-open block
    pending: list[tuple[torch.Tensor, torch.Tensor]] = field(default_factory=list)
    # per DSA layer: the stored index keys of the first `index_keys_n` blocks as fp32 (Runner._candidate_keys)
    index_keys: list[torch.Tensor] = field(default_factory=list)
    index_keys_n: int = 0

    def snapshot(self) -> tuple[int, torch.Tensor | None, list[tuple[torch.Tensor, torch.Tensor]], int]:
        return self.length, self.x_last, list(self.pending), self.index_keys_n

    def restore(
        self, snap: tuple[int, torch.Tensor | None, list[tuple[torch.Tensor, torch.Tensor]], int]
    ) -> None:
        """Rewind to a snapshot; later pool slots (and blocks' index keys) are simply rewritten by the
        next tokens, so the fp32 copies of keys completed since are dropped."""
        self.length, self.x_last, pending, self.index_keys_n = snap
        self.pending = list(pending)


class Runner:
    def __init__(self, model: ReferenceModel, pool: KVPool, fault: str | None = None):
        faults.check(fault, pool.index_k_dtype)
        self.model = model
        self.pool = pool
        self.cfg = model.cfg
        self.fault = fault  # a planted indexer bug (launchers/reference/faults.py), None normally

    def _slots(self, seq: SequenceState, positions: torch.Tensor) -> torch.Tensor:
        r = self.cfg.compress_ratio
        return seq.pages[torch.div(positions, r, rounding_mode="floor")] * r + positions % r

    def _write_index_keys(self, layer: int, pages: torch.Tensor, keys: torch.Tensor) -> None:
        stored = store_keys(keys, self.pool.index_k_dtype)
        if stored.dtype == "fp4":
            assert stored.scale is not None
            fp4.write_slots(self.pool.index_k[layer], pages, stored.data, stored.scale)
            return
        self.pool.index_k[layer, pages] = stored.data
        if stored.scale is not None and self.pool.index_scale is not None:
            self.pool.index_scale[layer, pages] = stored.scale

    def _read_index_keys(self, layer: int, pages: torch.Tensor) -> StoredKeys:
        if self.pool.index_k_dtype == "fp4":
            codes, exponent = fp4.read_slots(self.pool.index_k[layer], pages)
            return StoredKeys("fp4", codes.unsqueeze(0), exponent.unsqueeze(0))
        data = self.pool.index_k[layer, pages].unsqueeze(0)
        if self.pool.index_scale is None:
            return StoredKeys("bf16", data)
        return StoredKeys("fp8", data, self.pool.index_scale[layer, pages].unsqueeze(0))

    def _candidate_keys(self, seq: SequenceState, layer: int, n_blocks: int) -> StoredKeys:
        """The stored index keys of the sequence's first n_blocks blocks. fp8 and bf16 data come as
        the fp32 values index_logits would convert them to (its .float() is then a no-op), fp4 as its
        exact fp32 dequantised values, kept per sequence: a complete block's key never changes while
        the sequence holds its page, and converting every candidate key at every decode step was half
        of a decode step at 22K tokens (fp8 -> fp32 runs element by element on the CPU) and most of
        one with fp4 keys at 131K. Under a scale fault fp4 keys are read as stored, so that the fault
        can misread their exponents."""
        if self.pool.index_k_dtype == "fp4" and self.fault in faults.SCALE_FAULTS:
            return self._read_index_keys(layer, seq.pages[:n_blocks])
        if seq.index_keys_n < n_blocks:
            self._extend_index_keys(seq, n_blocks)
        data = seq.index_keys[layer][:n_blocks].unsqueeze(0)
        if self.pool.index_k_dtype == "fp4":
            return StoredKeys("fp4", data)
        if self.pool.index_scale is None:
            return StoredKeys("bf16", data)
        return StoredKeys("fp8", data, self.pool.index_scale[layer, seq.pages[:n_blocks]].unsqueeze(0))

    def _extend_index_keys(self, seq: SequenceState, n_blocks: int) -> None:
        """Convert the keys of blocks index_keys_n..n_blocks-1 of every DSA layer into the fp32 copies
        (grown by doubling: one step adds at most one block)."""
        have = seq.index_keys_n
        pages = seq.pages[have:n_blocks]
        if self.pool.index_k_dtype == "fp4":
            new = torch.stack(
                [fp4.dequantize_rows_e2m1(*fp4.read_slots(cache, pages)) for cache in self.pool.index_k]
            )
        else:
            new = self.pool.index_k[:, pages].float()  # (n_dsa, new blocks, D)
        capacity = seq.index_keys[0].shape[0] if seq.index_keys else 0
        if n_blocks > capacity:
            grown = torch.empty(new.shape[0], max(n_blocks, 2 * capacity), new.shape[-1])
            if have:
                grown[:, :have] = torch.stack([keys[:have] for keys in seq.index_keys])
            seq.index_keys = list(grown.unbind(0))
        for layer, keys in enumerate(seq.index_keys):
            keys[have:n_blocks] = new[layer]
        seq.index_keys_n = n_blocks

    @torch.inference_mode()
    def prefill(self, seq: SequenceState, prompt: list[int], cached: int = 0) -> None:
        """Write the prompt's KV and index keys; the first `cached` tokens (whole pages, a prefix-cache
        hit) are already in seq's pages and only the rest is written. The SWA stack is recomputed from
        `swa_lookback_start(cached)` on: its outputs from `cached` on then match a full prefill."""
        model, pool, r = self.model, self.pool, self.cfg.compress_ratio
        t = len(prompt)
        if cached % r or not 0 <= cached < t:
            raise ValueError(f"a cached prefix must be whole pages shorter than the prompt, got {cached}")
        start = swa_lookback_start(cached, self.cfg.swa_window, self.cfg.n_swa_layers)
        x, caches = model.swa_stack(torch.tensor([prompt[start:]], dtype=torch.long), start=start)
        slots = self._slots(seq, torch.arange(t))
        recent = slots[-self.cfg.swa_window :]  # decode reads only the last window of SWA K/V
        for layer, (k, v) in enumerate(caches):
            pool.swa_k[layer, recent] = k[0, :, -len(recent) :].transpose(0, 1).to(pool.kv_dtype)
            pool.swa_v[layer, recent] = v[0, :, -len(recent) :].transpose(0, 1).to(pool.kv_dtype)
        src = model.src_norm(x[0, cached - start :])  # positions cached .. t-1
        first_block, n_blocks = cached // r, t // r
        new_blocks = n_blocks - first_block
        seq.pending = []
        for layer, block in enumerate(model.dsa):
            k, v = block.kv(src)
            pool.dsa_k[layer, slots[cached:]] = k.to(pool.kv_dtype)
            pool.dsa_v[layer, slots[cached:]] = v.to(pool.kv_dtype)
            kv, score = block.indexer.compressor.token_features(src)
            if new_blocks and not faults.skips_index_store(self.fault, cached):
                shape = (new_blocks, r, kv.shape[-1])
                keys = block.indexer.block_keys(
                    kv[: new_blocks * r].reshape(shape), score[: new_blocks * r].reshape(shape)
                )
                self._write_index_keys(layer, seq.pages[first_block:n_blocks], keys)
            seq.pending.append((kv[new_blocks * r :].clone(), score[new_blocks * r :].clone()))
        seq.x_last = x[0, -1].clone()
        seq.length = t

    @torch.inference_mode()
    def append(self, seq: SequenceState, token: int) -> None:
        """Run the SWA stack for one new token and write its K, V and (block-completing) index keys."""
        model, pool, cfg = self.model, self.pool, self.cfg
        pos = seq.length
        slot = self._slots(seq, torch.tensor([pos]))
        cos, sin = rope_tables(torch.tensor([pos]), cfg.head_dim, cfg.rope_theta)
        x = model.embed(torch.tensor([[token]]))
        window = self._slots(seq, torch.arange(max(0, pos - cfg.swa_window + 1), pos + 1))
        for layer, block in enumerate(model.swa):
            q, k, v = block.qkv(x, cos, sin)  # (1, H, 1, hd)
            pool.swa_k[layer, slot] = k[0].transpose(0, 1).to(pool.kv_dtype)
            pool.swa_v[layer, slot] = v[0].transpose(0, 1).to(pool.kv_dtype)
            keys = pool.swa_k[layer, window].float().transpose(0, 1).unsqueeze(0)
            values = pool.swa_v[layer, window].float().transpose(0, 1).unsqueeze(0)
            x = block.finish(x, F.scaled_dot_product_attention(q, keys, values))
        src = model.src_norm(x[0])  # (1, d)
        for layer, block in enumerate(model.dsa):
            k, v = block.kv(src)
            pool.dsa_k[layer, slot] = k.to(pool.kv_dtype)
            pool.dsa_v[layer, slot] = v.to(pool.kv_dtype)
            kv, score = block.indexer.compressor.token_features(src)
            kv = torch.cat([seq.pending[layer][0], kv])
            score = torch.cat([seq.pending[layer][1], score])
            if kv.shape[0] == cfg.compress_ratio:
                keys = block.indexer.block_keys(kv.unsqueeze(0), score.unsqueeze(0))
                self._write_index_keys(layer, seq.pages[pos // cfg.compress_ratio].view(1), keys)
                kv, score = kv[:0], score[:0]
            seq.pending[layer] = (kv, score)
        seq.x_last = x[0, 0]
        seq.length = pos + 1

    @torch.inference_mode()
    def next_logits(
        self, seq: SequenceState, index_topk: int, indexer_scores: list[torch.Tensor] | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """The DSA stack at the last written position: logits (V,) and each layer's selected
        blocks, int32 (n_dsa, index_topk) padded with -1. If `indexer_scores` is a list, each
        layer's indexer logits over its candidate blocks are appended to it (for analysis)."""
        model, pool, cfg = self.model, self.pool, self.cfg
        if seq.x_last is None:
            raise RuntimeError("next_logits before prefill")
        pos = seq.length - 1
        start = int(window_start(torch.tensor(pos), cfg.dsa_window, cfg.compress_ratio))
        n_cand = faults.scored_candidates(self.fault, start // cfg.compress_ratio)
        h = seq.x_last.unsqueeze(0)  # (1, d)
        selections = []
        for layer, block in enumerate(model.dsa):
            if n_cand:
                iq, iw = block.indexer.queries(block.attn_norm(h))
                keys = self._candidate_keys(seq, layer, n_cand)
                keys = faults.misread_scales(keys, self.fault)
                logits = index_logits(iq.unsqueeze(0), iw.unsqueeze(0), keys)
                sel = select_topk(logits[0, 0], torch.tensor(n_cand), index_topk)
                if indexer_scores is not None:
                    indexer_scores.append(logits[0, 0].clone())
            else:
                sel = torch.full((index_topk,), -1, dtype=torch.long)
            selections.append(sel)
            chosen = sel[sel >= 0]
            in_blocks = (
                chosen.unsqueeze(1) * cfg.compress_ratio + torch.arange(cfg.compress_ratio)
            ).flatten()
            positions = torch.cat([in_blocks, torch.arange(start, pos + 1)])
            slots = self._slots(seq, positions)
            keys = pool.dsa_k[layer, slots].float().transpose(0, 1)  # (H, S, hd)
            values = pool.dsa_v[layer, slots].float().transpose(0, 1)
            q = block.query(h)[0].unsqueeze(1)  # (H, 1, hd)
            attn = F.scaled_dot_product_attention(q, keys, values, scale=1.0)  # queries are pre-scaled
            h = block.finish(h, attn.squeeze(1).unsqueeze(0))
        return model.logits(h)[0], torch.stack(selections).to(torch.int32)


def swa_lookback_start(cached: int, window: int, n_layers: int) -> int:
    """Where a prefill after a cached prefix restarts the sliding-window stack. Layer l's output at
    a position depends on the tokens up to l * window before it; band_attention computes windows
    in chunks of `window` from the sequence's start, so restarting on a chunk boundary n_layers
    chunks back reproduces every output from `cached` on with the same arithmetic."""
    return max(0, (cached // window - n_layers) * window)
