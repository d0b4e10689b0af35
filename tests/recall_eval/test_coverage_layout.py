"""Which layout a server's indexer_topk has, and how streamed /generate chunks are read."""

from __future__ import annotations

import json

import numpy as np
import pytest

from recall_eval.indexer_capture import _Stream
from recall_eval.indexer_layout import LayoutError, resolve_layout

REFERENCE_INFO = {
    "engine": "reference",
    "num_indexer_layers": 2,
    "index_topk": 8,
    "indexer_block_size": 4,
    "indexer_local_window": 64,
}
V32 = {"architectures": ["DeepseekV32ForCausalLM"], "model_type": "deepseek_v32"}
V4 = {"architectures": ["DeepseekV4ForCausalLM"], "model_type": "deepseek_v4"}


def _row(layers: int, topk: int, values: list[int]) -> np.ndarray:
    row = np.full((layers, topk), -1, dtype=np.int32)
    row[:, : len(values)] = values
    return row.reshape(-1)


def test_reference_layout_comes_from_server_info():
    layout = resolve_layout(REFERENCE_INFO, {"model_type": "reference_dsa"}, _row(2, 8, []), 5)
    assert (layout.n_layers, layout.index_topk, layout.kind) == (2, 8, "block")
    assert (layout.tokens_per_entry, layout.local_window, layout.window_align) == (4, 64, 4)
    with pytest.raises(LayoutError, match="does not match"):
        resolve_layout(REFERENCE_INFO, {}, _row(2, 4, []), 5)


def test_dsa_positions_are_told_from_physical_slots():
    prompt = 6
    positions = _row(61, 2048, [5, 0, 3, 1, 4, 2])  # every position, in any order
    layout = resolve_layout({}, V32, positions, prompt)
    assert (layout.n_layers, layout.index_topk, layout.kind, layout.tokens_per_entry) == (
        61,
        2048,
        "token",
        1,
    )
    slots = _row(61, 2048, [64, 65, 66, 67, 68, 69])  # SGLang never hands out slot 0
    with pytest.raises(LayoutError, match="SGLANG_DSA_FUSE_TOPK=0"):
        resolve_layout({}, V32, slots, prompt)
    # index_topk below the probe's length: a full row of positions below P is all that can be checked
    subset = _row(61, 4, [5, 0, 3, 1])
    assert resolve_layout({}, V32, subset, prompt, profile_topk=4).kind == "token"
    with pytest.raises(LayoutError, match="physical KV slots"):
        resolve_layout({}, V32, _row(61, 4, [65, 66, 67, 68]), prompt, profile_topk=4)


def test_index_topk_from_the_server_override_then_profile_then_config():
    override = {"json_model_override_args": json.dumps({"index_topk": 1024})}
    assert resolve_layout(override, V32, _row(61, 1024, list(range(4))), 4).index_topk == 1024
    assert resolve_layout({}, V32, _row(61, 256, list(range(4))), 4, profile_topk=256).index_topk == 256
    config = {"index_topk": 128, "num_hidden_layers": 61}
    assert resolve_layout({}, V32, _row(61, 128, list(range(4))), 4, model_config=config).n_layers == 61
    with pytest.raises(LayoutError, match="config.json has 60 indexer layers"):
        resolve_layout(
            {}, V32, _row(61, 128, list(range(4))), 4, model_config={**config, "num_hidden_layers": 60}
        )
    with pytest.raises(LayoutError, match="not a multiple of index_topk 2048"):
        resolve_layout({}, V32, np.zeros(61 * 1000, dtype=np.int32), 4)


def test_v4_layout_counts_c4_layers_and_has_overlap_and_window():
    config = {"num_hidden_layers": 5, "compress_ratios": [0, 4, 128, 4, 4, 4], "index_topk": 512}
    layout = resolve_layout({}, V4, _row(3, 512, [0, 1]), 9, model_config=config)
    assert (layout.n_layers, layout.kind, layout.tokens_per_entry, layout.overlap_entries) == (
        3,
        "block",
        4,
        1,
    )
    assert layout.local_window == 128


def test_unknown_models_are_refused():
    with pytest.raises(LayoutError, match="not a DSA or DeepSeek-V4 model"):
        resolve_layout({}, {"architectures": ["LlamaForCausalLM"]}, _row(1, 1, []), 3)


def _chunks(stream: _Stream, chunks: list[dict]) -> _Stream:
    for i, chunk in enumerate(chunks):
        stream.add(chunk, float(i))
    return stream


def test_cumulative_and_incremental_streams_read_the_same():
    cumulative = [
        {"text": "Th", "output_ids": [7], "meta_info": {"completion_tokens": 1}},
        {"text": "The", "output_ids": [7, 7], "meta_info": {"completion_tokens": 2}},
        {"text": "The c", "output_ids": [7, 7, 9, 9], "meta_info": {"completion_tokens": 4}},
    ]
    deltas = [
        {"text": "Th", "output_ids": [7], "meta_info": {"completion_tokens": 1}},
        {"text": "e", "output_ids": [7], "meta_info": {"completion_tokens": 2}},
        {"text": " c", "output_ids": [9, 9], "meta_info": {"completion_tokens": 4}},
    ]
    a, b = _chunks(_Stream(), cumulative), _Stream()
    _chunks(b, deltas)
    assert a.ids == b.ids == [7, 7, 9, 9]
    assert a.text == b.text == "The c"
    assert a.marks == b.marks == [(1, 2), (2, 3), (4, 5)]
    assert a.token_times == b.token_times == [0.0, 1.0, 2.0]
