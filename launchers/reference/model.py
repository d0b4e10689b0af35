"""The reference DSA model: sliding-window layers below, DeepSeek-style sparse layers above.

    tokens -> embed -> [SlidingWindowBlock] x n_swa -> x
    src = src_norm(x)                        K, V and index keys of every DSA layer come from src
    h = x -> [DSABlock] x n_dsa -> final_norm -> tied LM head

Because the DSA layers read keys/values from `src` (not from each other), the DSA stack can be
run for any subset of query positions on its own: in training for the answer positions and a
sample of others, in prefill for the last prompt position only.
"""

from __future__ import annotations

from pathlib import Path

import torch
import torch.nn.functional as F
from safetensors.torch import load_file, save_file
from torch import nn

from launchers.dsa.indexer import KeyDtype, index_logits, store_keys
from launchers.dsa.norm import RMSNorm
from launchers.dsa.topk import candidate_mask, n_candidate_blocks, select_topk, window_start
from launchers.reference.config import ModelConfig
from launchers.reference.faults import misread_scales
from launchers.reference.layers import DSABlock, SlidingWindowBlock, rope_tables


class ReferenceModel(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.cfg = cfg
        self.embed = nn.Embedding(cfg.vocab_size, cfg.d_model)
        self.swa = nn.ModuleList(
            SlidingWindowBlock(cfg.d_model, cfg.n_heads, cfg.mlp_hidden, cfg.swa_window, cfg.norm_eps)
            for _ in range(cfg.n_swa_layers)
        )
        self.src_norm = RMSNorm(cfg.d_model, cfg.norm_eps)
        self.dsa = nn.ModuleList(
            DSABlock(
                cfg.d_model,
                cfg.n_heads,
                cfg.mlp_hidden,
                cfg.norm_eps,
                cfg.index_n_heads,
                cfg.index_head_dim,
                cfg.compress_ratio,
            )
            for _ in range(cfg.n_dsa_layers)
        )
        self.final_norm = RMSNorm(cfg.d_model, cfg.norm_eps)
        self.apply(_init_weights)

    def logits(self, h: torch.Tensor) -> torch.Tensor:
        return F.linear(self.final_norm(h), self.embed.weight)

    def swa_stack(
        self, tokens: torch.Tensor, start: int = 0
    ) -> tuple[torch.Tensor, list[tuple[torch.Tensor, torch.Tensor]]]:
        """tokens (B, T) at positions start.. -> x (B, T, d) and each layer's k, v (B, H, T, hd).

        The sequence is padded at the end to a multiple of the window (causal: the padding
        changes nothing before it) so that the band attention needs no copies."""
        t = tokens.shape[1]
        pad = -t % self.cfg.swa_window
        if pad:
            tokens = F.pad(tokens, (0, pad))
        pos = torch.arange(start, start + t + pad, device=tokens.device)
        cos, sin = rope_tables(pos, self.cfg.head_dim, self.cfg.rope_theta)
        x = self.embed(tokens)
        caches = []
        for block in self.swa:
            x, k, v = block(x, cos, sin)
            caches.append((k[:, :, :t], v[:, :, :t]))
        return x[:, :t], caches

    def forward_train(
        self, tokens: torch.Tensor, qpos: torch.Tensor, index_topk: int | None, key_dtype: KeyDtype = "fp32"
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Training pass for a subset of query positions.

        tokens (B, T); qpos (B, Q) positions whose next token is predicted; index_topk None
        means dense DSA attention (warm-up). Returns logits (B, Q, V) and the indexer KL loss
        (mean over DSA layers and over queries that have candidate blocks).
        """
        x, _ = self.swa_stack(tokens)
        return self.dsa_forward(x, qpos, index_topk, key_dtype)

    def dsa_forward(
        self,
        x: torch.Tensor,
        qpos: torch.Tensor,
        index_topk: int | None,
        key_dtype: KeyDtype = "fp32",
        fault: str | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """The DSA stack for the query positions qpos (B, Q), given the SWA stack's output x (B, T, d);
        `fault` plants a scale fault (faults.misread_scales) in the indexer's key reads, for evaluation."""
        src = self.src_norm(x)
        h = torch.gather(x, 1, qpos.unsqueeze(-1).expand(-1, -1, x.shape[-1]))
        kls = []
        for block in self.dsa:
            h, kl = self._dsa_train(block, h, qpos, src, index_topk, key_dtype, fault)
            kls.append(kl)
        return self.logits(h), torch.stack(kls).mean()

    def _dsa_train(
        self,
        block: DSABlock,
        h: torch.Tensor,
        qpos: torch.Tensor,
        src: torch.Tensor,
        index_topk: int | None,
        key_dtype: KeyDtype,
        fault: str | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        cfg = self.cfg
        t = src.shape[1]
        n_blocks = t // cfg.compress_ratio
        k, v = block.kv(src)  # (B, T, H, hd)
        q = block.query(h)  # (B, Q, H, hd)
        scores = torch.einsum("bqhd,bthd->bhqt", q, k).float()
        key_pos = torch.arange(t, device=src.device)
        causal = key_pos.view(1, 1, t) <= qpos.unsqueeze(-1)  # (B, Q, T)

        # indexer, trained only through the KL term (inputs detached, as DeepSeek-V3.2 does)
        iq, iw = block.indexer.queries(block.attn_norm(h).detach())
        ikeys = block.indexer.keys(src.detach())
        ilog = index_logits(iq, iw, misread_scales(store_keys(ikeys, key_dtype), fault))  # (B, Q, n_blocks)
        n_cand = n_candidate_blocks(qpos, cfg.dsa_window, cfg.compress_ratio)
        cmask = candidate_mask(n_cand, n_blocks)
        with torch.no_grad():
            dense = torch.softmax(scores.masked_fill(~causal.unsqueeze(1), float("-inf")), dim=-1).mean(1)
            target = (
                dense[..., : n_blocks * cfg.compress_ratio]
                .unflatten(-1, (n_blocks, cfg.compress_ratio))
                .sum(-1)
            )
            target = target * cmask
            target = target / target.sum(-1, keepdim=True).clamp_min(1e-9)
        log_q = torch.log_softmax(ilog.masked_fill(~cmask, float("-inf")), dim=-1)
        terms = torch.where(target > 0, target * (torch.log(target.clamp_min(1e-12)) - log_q), 0.0)
        rows = (n_cand > 0).float()
        kl = (terms.sum(-1) * rows).sum() / rows.sum().clamp_min(1.0)

        if index_topk is None:
            allowed = causal
        else:
            sel = select_topk(ilog.detach(), n_cand, index_topk)  # (B, Q, k), -1 padded
            chosen = torch.zeros(*sel.shape[:-1], n_blocks + 1, dtype=torch.bool, device=src.device)
            chosen.scatter_(-1, torch.where(sel < 0, n_blocks, sel), True)
            in_blocks = chosen[..., :n_blocks].repeat_interleave(cfg.compress_ratio, dim=-1)
            in_blocks = F.pad(in_blocks, (0, t - in_blocks.shape[-1]))
            local = key_pos.view(1, 1, t) >= window_start(qpos, cfg.dsa_window, cfg.compress_ratio).unsqueeze(
                -1
            )
            allowed = causal & (local | in_blocks)
        probs = torch.softmax(scores.masked_fill(~allowed.unsqueeze(1), float("-inf")), dim=-1)
        attn = torch.einsum("bhqt,bthd->bqhd", probs.to(v.dtype), v)
        return block.finish(h, attn), kl

    def save(self, path: Path, dtype: torch.dtype = torch.float16) -> None:
        state = {k: v.detach().to("cpu", dtype).contiguous() for k, v in self.state_dict().items()}
        save_file(state, str(path))

    @classmethod
    def load(cls, weights_dir: Path, device: str | torch.device = "cpu") -> ReferenceModel:
        cfg = ModelConfig.load(weights_dir / "config.json")
        with torch.device("meta"):
            model = cls(cfg)
        state = {
            k: v.float()
            for k, v in load_file(str(weights_dir / "model.safetensors"), device=str(device)).items()
        }
        model.load_state_dict(state, assign=True)
        return model.eval()


def _init_weights(module: nn.Module) -> None:
    if isinstance(module, nn.Linear):
        nn.init.normal_(module.weight, std=0.02)
    elif isinstance(module, nn.Embedding):
        nn.init.normal_(module.weight, std=0.02)


def count_parameters(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())
