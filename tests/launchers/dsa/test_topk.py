"""Causal block selection: candidates are the complete blocks before the block-aligned window."""

from __future__ import annotations

import torch

from launchers.dsa.topk import n_candidate_blocks, select_topk, window_start


def test_window_and_candidates_cover_every_earlier_token_once() -> None:
    window, ratio = 64, 4
    for pos in range(0, 400):
        t = torch.tensor(pos)
        start = int(window_start(t, window, ratio))
        n = int(n_candidate_blocks(t, window, ratio))
        size = pos - start + 1
        assert start % ratio == 0
        assert size <= window + ratio - 1
        assert size >= window or start == 0
        covered = set(range(n * ratio)) | set(range(start, pos + 1))
        assert covered == set(range(pos + 1))
        assert n * ratio == start  # no overlap, no gap


def test_select_topk_orders_best_first_and_pads() -> None:
    logits = torch.tensor([[0.5, 3.0, -1.0, 2.0, 9.0, 7.0]])
    sel = select_topk(logits, torch.tensor([4]), 3)
    assert sel.tolist() == [[1, 3, 0]]  # blocks 4 and 5 are not candidates
    sel = select_topk(logits, torch.tensor([2]), 4)
    assert sel.tolist() == [[1, 0, -1, -1]]
    assert select_topk(logits, torch.tensor([0]), 2).tolist() == [[-1, -1]]
    assert select_topk(logits, torch.tensor([6]), 8).tolist() == [[4, 5, 1, 3, 0, 2, -1, -1]]
