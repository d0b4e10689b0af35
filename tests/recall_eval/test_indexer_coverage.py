"""Indexer coverage: decoding, needle -> entries, the local window, answer positions and the cause rule."""

from __future__ import annotations

import base64

import numpy as np
import pytest

from recall_eval.indexer_coverage import (
    IndexerDataError,
    IndexerLayout,
    answer_tokens,
    decode_indexer_topk,
    indexer_coverage,
    miss_cause,
    needle_entries,
    window_start,
    with_cause,
)
from recall_eval.types import IndexerCoverage

TOKENS = IndexerLayout(n_layers=3, index_topk=4, kind="token", source="test")
BLOCKS = IndexerLayout(n_layers=2, index_topk=4, kind="block", tokens_per_entry=4, source="test")
REFERENCE = IndexerLayout(
    n_layers=2, index_topk=4, kind="block", tokens_per_entry=4, local_window=64, window_align=4, source="test"
)


def _b64(array: np.ndarray) -> str:
    return base64.b64encode(np.ascontiguousarray(array, dtype=np.int32).tobytes()).decode()


def test_decode_gives_back_rows_layers_topk():
    array = np.arange(5 * 3 * 4, dtype=np.int32).reshape(5, 3, 4) - 7
    decoded = decode_indexer_topk(_b64(array), TOKENS)
    assert decoded.shape == (5, 3, 4)
    assert np.array_equal(decoded, array)


def test_decode_refuses_a_size_that_does_not_fit_the_layout():
    with pytest.raises(IndexerDataError, match="not a multiple of num_indexer_layers x index_topk = 3 x 4"):
        decode_indexer_topk(_b64(np.zeros(13, dtype=np.int32)), TOKENS)
    with pytest.raises(IndexerDataError, match="not base64"):
        decode_indexer_topk("###", TOKENS)
    with pytest.raises(IndexerDataError, match="whole number of int32"):
        decode_indexer_topk(base64.b64encode(b"abc").decode(), TOKENS)


def test_needle_tokens_map_to_entries():
    assert needle_entries(10, 13, TOKENS) == (10, 13)
    assert needle_entries(10, 13, BLOCKS) == (2, 4)  # tokens 10..12 are in blocks 2 and 3
    assert needle_entries(8, 12, BLOCKS) == (2, 3)  # exactly block 2
    v4 = IndexerLayout(n_layers=1, index_topk=4, kind="block", tokens_per_entry=4, overlap_entries=1)
    assert needle_entries(8, 12, v4) == (2, 4)  # entry 3 also mixes block 2 in
    with pytest.raises(ValueError, match="page table"):
        needle_entries(0, 1, IndexerLayout(n_layers=1, index_topk=1, kind="slot"))


def test_local_window_is_block_aligned_like_the_reference_engine():
    # launchers/dsa/topk.py: window_start(t) = 4 * floor(max(0, t - 64 + 1) / 4)
    assert window_start(63, REFERENCE) == 0
    assert window_start(100, REFERENCE) == 36
    assert window_start(101, REFERENCE) == 36
    assert window_start(103, REFERENCE) == 40
    assert window_start(100, TOKENS) == 101  # no window: nothing is visible without selection


def test_coverage_counts_selected_needle_per_layer_and_at_the_last_prompt_token():
    prompt, outputs = 10, 4
    topk = np.full((prompt + outputs - 1, 3, 4), -1, dtype=np.int32)
    needle = (2, 4)  # tokens 2 and 3
    # layer 0 selects the needle at every answer position, layer 1 only at the last prompt token,
    # layer 2 never (it picks other tokens)
    topk[9:, 0, :2] = [3, 8]
    topk[9, 1, 0] = 2
    topk[9:, 2, :3] = [5, 6, 7]
    cov = indexer_coverage(topk, TOKENS, prompt, range(outputs), needle)
    assert cov.layers == (1.0, 0.25, 0.0)
    assert cov.last_prompt_token == (True, True, False)
    assert cov.cause is None


def test_answer_positions_are_the_last_prompt_token_plus_the_answer_tokens():
    prompt = 10
    topk = np.full((prompt + 5, 3, 4), -1, dtype=np.int32)
    topk[[9 + 2, 9 + 3], 0, 0] = 3  # only the rows producing output tokens 2 and 3 select the needle
    cov = indexer_coverage(topk, TOKENS, prompt, range(2, 4), (3, 4))
    assert cov.layers[0] == pytest.approx(2 / 3)  # positions 9, 11, 12
    assert cov.last_prompt_token[0] is False


def test_needle_in_the_local_window_counts_as_attended_without_selection():
    prompt = 200
    topk = np.full((prompt, 2, 4), -1, dtype=np.int32)
    near = indexer_coverage(topk, REFERENCE, prompt, range(1), (180, 190))  # window of 199 starts at 136
    far = indexer_coverage(topk, REFERENCE, prompt, range(1), (20, 30))
    assert near.layers == (1.0, 1.0) and far.layers == (0.0, 0.0)


def test_missing_last_prompt_row_is_an_error():
    with pytest.raises(IndexerDataError, match="row of the last prompt token is missing"):
        indexer_coverage(np.zeros((5, 3, 4), dtype=np.int32), TOKENS, 8, range(1), (0, 1))


def test_answer_tokens_of_a_pass_are_the_ones_carrying_the_value():
    # streamed chunks: "The " | "code " | "is " | "ZEB" | "RA-1" | "2-X" | "."
    pieces = ["The ", "code ", "is ", "ZEB", "RA-1", "2-X", "."]
    marks, text = [], ""
    for i, piece in enumerate(pieces, start=1):
        text += piece
        marks.append((i, len(text)))
    assert answer_tokens(text, marks, ("zebra-12-x",), 7, passed=True) == range(3, 6)
    assert answer_tokens(text, marks, ("zebra-12-x",), 7, passed=False) == range(7)
    thinking = "<think>ZEBRA-12-X?</think> " + text
    shifted = [(n, c + len("<think>ZEBRA-12-X?</think> ")) for n, c in marks]
    assert answer_tokens(thinking, [(1, 27), *shifted], ("ZEBRA-12-X",), 8, passed=True) == range(3, 6)


@pytest.mark.parametrize(
    ("layers", "cause"),
    [
        ((1.0, 0.0), "selection"),  # 1 of 2 is not most
        ((1.0, 0.5), "generation"),  # a share of exactly one half counts as selected
        ((0.49, 1.0, 1.0), "generation"),
        ((1.0, 0.2, 0.3), "selection"),
        ((0.0,), "selection"),
        ((0.6,), "generation"),
    ],
)
def test_cause_rule(layers, cause):
    assert miss_cause(IndexerCoverage(layers=layers, last_prompt_token=(True,) * len(layers))) == cause


def test_only_answered_non_passes_get_a_cause():
    cov = IndexerCoverage(layers=(0.0, 0.0), last_prompt_token=(False, False))
    assert with_cause(cov, "miss").cause == "selection"
    assert with_cause(cov, "truncated").cause == "selection"
    assert with_cause(cov, "empty").cause == "selection"
    assert with_cause(cov, "pass").cause is None
