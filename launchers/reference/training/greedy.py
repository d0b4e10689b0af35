"""Batched greedy decoding with the training-time code path (for GPU evaluation and validation).

The prompt goes through the sliding-window stack once; every generated token's SWA output is
recomputed from the last `tail` tokens only (exact: a token's SWA output depends on at most
n_swa * (window - 1) previous tokens, and RoPE attention is shift-invariant), and the DSA stack
runs for the last position of each sequence. The engine (engine.py) does the same per request
with a KV pool; this version trades memory for batch throughput on a GPU.
"""

from __future__ import annotations

import torch

from launchers.dsa.indexer import KeyDtype
from launchers.reference.model import ReferenceModel


@torch.no_grad()
def prompt_states(
    model: ReferenceModel, prompts: list[list[int]], pad_id: int, device: torch.device
) -> tuple[torch.Tensor, torch.Tensor]:
    """Right-padded prompt tokens (B, T) and their SWA-stack outputs (B, T, d)."""
    t = max(len(p) for p in prompts)
    tokens = torch.full((len(prompts), t), pad_id, dtype=torch.long)
    for i, p in enumerate(prompts):
        tokens[i, : len(p)] = torch.tensor(p)
    tokens = tokens.to(device)
    x, _ = model.swa_stack(tokens)
    return tokens, x


@torch.no_grad()
def greedy_from_states(
    model: ReferenceModel,
    tokens: torch.Tensor,
    x: torch.Tensor,
    lengths: list[int],
    max_new: int,
    index_topk: int,
    key_dtype: KeyDtype,
    eos_id: int,
    fault: str | None = None,
) -> list[list[int]]:
    """Greedy continuations (eos excluded) of the prompts behind (tokens, x); `fault` plants a scale
    fault in the indexer's key reads (faults.misread_scales)."""
    cfg = model.cfg
    b, t0 = tokens.shape
    device = tokens.device
    tail = cfg.n_swa_layers * (cfg.swa_window - 1) + 4
    toks = torch.cat([tokens, torch.zeros(b, max_new, dtype=tokens.dtype, device=device)], 1)
    xs = torch.cat([x, torch.zeros(b, max_new, x.shape[-1], dtype=x.dtype, device=device)], 1)
    cur = torch.tensor(lengths, device=device) - 1
    done = torch.zeros(b, dtype=torch.bool, device=device)
    rows = torch.arange(b, device=device)
    out: list[list[int]] = [[] for _ in range(b)]
    for _ in range(max_new):
        end = int(cur.max()) + 1
        logits, _ = model.dsa_forward(xs[:, :end], cur.unsqueeze(1), index_topk, key_dtype, fault)
        nxt = logits[:, 0].argmax(-1)
        for i in torch.nonzero(~done).flatten().tolist():
            if int(nxt[i]) == eos_id:
                continue
            out[i].append(int(nxt[i]))
        done |= nxt == eos_id
        if bool(done.all()):
            break
        cur = torch.where(done, cur, cur + 1)
        toks[rows, cur] = torch.where(done, toks[rows, cur], nxt)
        if int(cur.min()) + 1 >= tail:
            idx = cur.unsqueeze(1) - tail + 1 + torch.arange(tail, device=device)
            xt, _ = model.swa_stack(torch.gather(toks, 1, idx))
            xs[rows, cur] = xt[:, -1]
        else:
            full, _ = model.swa_stack(toks[:, : int(cur.max()) + 1])
            xs[rows, cur] = full[rows, cur]
    return out
