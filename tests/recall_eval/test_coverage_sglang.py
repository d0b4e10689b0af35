"""meta_info.indexer_topk built by SGLang 0.5.23's own code, read back by recall_eval.

Importing SGLang's scheduler modules needs the CUDA stack (and torchvision), so the functions that
make the bytes are taken from the installed sglang==0.5.23 wheel's source and run as they are:
BaseDeviceCache.capture, BaseTopkCapturer._get_local_slice / on_forward_end (the per-forward copy
into the host buffer keyed by KV slot), BaseTopkCapturer.get_topk (the per-request gather through
req_to_token), DetokenizerManager._b64_encode_per_request (the base64 of the int32 bytes), and
extract_indexer_topk_from_meta_info (SGLang's documented reader). Only their decorators and type
annotations are dropped (the annotated names live in CUDA-only modules).
"""

from __future__ import annotations

import ast
import importlib.metadata
import importlib.util
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
import torch

from recall_eval.indexer_capture import Generation, IndexerCapture
from recall_eval.indexer_coverage import IndexerLayout, decode_indexer_topk
from recall_eval.types import Case, ChatMessage, Completion

pytestmark = pytest.mark.sglang
SGLANG_VERSION = "0.5.23"


def _sglang_source(relative: str) -> Path:
    try:
        version = importlib.metadata.version("sglang")
    except importlib.metadata.PackageNotFoundError:
        pytest.fail(f"sglang is not installed: pip install --no-deps sglang=={SGLANG_VERSION}")
    assert version == SGLANG_VERSION, f"need sglang=={SGLANG_VERSION}, found {version}"
    spec = importlib.util.find_spec("sglang")  # finds the package without importing it
    assert spec is not None and spec.submodule_search_locations
    return Path(spec.submodule_search_locations[0]) / relative


def sglang_function(relative: str, name: str, owner: str | None = None) -> Any:
    """A function (or a method of class `owner`) from SGLang's source, compiled on its own."""
    tree = ast.parse(_sglang_source(relative).read_text())
    scope: list[ast.stmt] = tree.body
    if owner is not None:
        scope = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == owner).body
    node = next(n for n in scope if isinstance(n, ast.FunctionDef) and n.name == name)
    node.decorator_list = []
    node.returns = None
    for arg in [*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs]:
        arg.annotation = None
    module = ast.fix_missing_locations(ast.Module(body=[node], type_ignores=[]))
    import pybase64  # one of sglang's own dependencies: present where sglang is (the marker skips otherwise)

    namespace: dict[str, Any] = {"torch": torch, "np": np, "pybase64": pybase64}
    exec(compile(module, f"sglang/{relative}", "exec"), namespace)  # noqa: S102 - SGLang's own code
    return namespace[name]


class SGLangCapturer:
    """The capturer state SGLang keeps, driven through SGLang's own methods."""

    def __init__(self, n_slots: int, max_batch: int, layers: int, topk: int):
        base = "srt/state_capturer/base.py"
        self._capture = sglang_function(base, "capture", owner="BaseDeviceCache")
        self._slice = sglang_function(base, "_get_local_slice", owner="BaseTopkCapturer")
        self._forward_end = sglang_function(base, "on_forward_end", owner="BaseTopkCapturer")
        self._get_topk = sglang_function(base, "get_topk", owner="BaseTopkCapturer")
        self.topk_size = topk
        self.device_cache = SimpleNamespace(buffer=torch.zeros((max_batch, layers, topk), dtype=torch.int32))
        # other requests left their rows in the host buffer; SGLang allocates it zeroed (base.py:75)
        garbage = torch.randint(0, 1000, (n_slots, layers, topk), generator=torch.Generator().manual_seed(1))
        self.host_cache = SimpleNamespace(buffer=garbage.to(torch.int32))

    def _get_local_slice(
        self, forward_batch: Any, can_run_graph: bool, cuda_graph_batch: Any
    ) -> torch.Tensor:
        return self._slice(self, forward_batch, can_run_graph, cuda_graph_batch)

    def forward(self, slots: list[int], selections: np.ndarray) -> None:
        """One forward pass over tokens written at `slots`; selections (tokens, layers, topk)."""
        for layer in range(selections.shape[1]):
            self._capture(self.device_cache, layer, torch.from_numpy(selections[:, layer, :]))
        batch = SimpleNamespace(out_cache_loc=torch.tensor(slots), out_cache_loc_virtual=None)
        assert self._forward_end(self, batch, False, None) is None

    def get_topk(self, req_pool_idx: int, seqlen: int, req_to_token_pool: Any) -> torch.Tensor:
        return self._get_topk(self, req_pool_idx, seqlen, req_to_token_pool)


def _selections(positions: range, layers: int, topk: int, rng: np.random.Generator) -> np.ndarray:
    """DSA (unfused) selections: for the query at position t, up to topk token positions <= t, -1 padded."""
    out = np.full((len(positions), layers, topk), -1, dtype=np.int32)
    for row, t in enumerate(positions):
        for layer in range(layers):
            chosen = rng.choice(t + 1, size=min(topk, t + 1), replace=False)
            out[row, layer, : len(chosen)] = chosen
    return out


def test_bytes_from_sglangs_capturer_decode_to_rows_by_position():
    rng = np.random.default_rng(0)
    layers, topk, prompt, outputs = 3, 8, 21, 5
    seqlen = prompt + outputs
    slots = [int(s) for s in rng.permutation(np.arange(1, 200))[:seqlen]]  # slot 0 is SGLang's padding sink
    req_to_token = torch.zeros((4, 64), dtype=torch.int64)
    req_to_token[2, :seqlen] = torch.tensor(slots)
    pool = SimpleNamespace(req_to_token=req_to_token)

    capturer = SGLangCapturer(n_slots=256, max_batch=32, layers=layers, topk=topk)
    prefill = _selections(range(prompt), layers, topk, rng)
    capturer.forward(slots[:prompt], prefill)  # prefill computes every prompt position
    decode = []
    for j in range(outputs - 1):  # output token j is fed back at position prompt + j (the last never is)
        step = _selections(range(prompt + j, prompt + j + 1), layers, topk, rng)
        capturer.forward([slots[prompt + j]], step)
        decode.append(step)
    expected = np.concatenate([prefill, *decode])
    assert expected.shape == (seqlen - 1, layers, topk)

    per_request = capturer.get_topk(2, seqlen, pool)
    encode = sglang_function(
        "srt/managers/detokenizer_manager.py", "_b64_encode_per_request", "DetokenizerManager"
    )
    [b64] = encode([per_request])
    meta = {"meta_info": {"indexer_topk": b64}}
    extract = sglang_function("srt/state_capturer/indexer_topk.py", "extract_indexer_topk_from_meta_info")
    theirs = extract(meta).reshape(seqlen - 1, layers, topk)  # the reshape SGLang's docstring asks for

    layout = IndexerLayout(n_layers=layers, index_topk=topk, kind="token", source="test")
    ours = decode_indexer_topk(b64, layout)
    assert np.array_equal(theirs, expected)
    assert np.array_equal(ours, expected)


def test_coverage_from_sglang_bytes_finds_the_needle_where_it_was_selected():
    layers, topk, prompt, outputs = 2, 4, 12, 3
    seqlen = prompt + outputs
    slots = list(range(40, 40 + seqlen))
    req_to_token = torch.zeros((1, 32), dtype=torch.int64)
    req_to_token[0, :seqlen] = torch.tensor(slots)
    capturer = SGLangCapturer(n_slots=128, max_batch=16, layers=layers, topk=topk)
    prefill = np.full((prompt, layers, topk), -1, dtype=np.int32)
    prefill[-1, 0, :2] = [3, 7]  # last prompt token: layer 0 picks the needle (tokens 3..4), layer 1 not
    prefill[-1, 1, :2] = [8, 9]
    capturer.forward(slots[:prompt], prefill)
    for j in range(outputs - 1):
        step = np.full((1, layers, topk), -1, dtype=np.int32)
        step[0, :, 0] = 4  # both layers pick the needle while generating
        capturer.forward([slots[prompt + j]], step)
    encode = sglang_function(
        "srt/managers/detokenizer_manager.py", "_b64_encode_per_request", "DetokenizerManager"
    )
    [b64] = encode([capturer.get_topk(0, seqlen, SimpleNamespace(req_to_token=req_to_token))])

    case = Case(
        id="c",
        suite="needle",
        messages=(ChatMessage(role="user", content="q"),),
        expected=("ZEBRA-1-X",),
        target_tokens=prompt,
        depth_percent=25.0,
        seed=0,
        needle_token_offset=3,
        needle_token_end=5,
    )
    generation = Generation(
        completion=Completion(text="no idea"),
        raw_text="no idea",
        prompt_tokens=prompt,
        output_tokens=outputs,
        marks=((1, 2), (2, 5), (3, 7)),
        indexer_topk=b64,
    )
    layout = IndexerLayout(n_layers=layers, index_topk=topk, kind="token", source="test")
    coverage = IndexerCapture(client=None, layout=layout).coverage(case, generation, "miss")  # type: ignore[arg-type]
    assert coverage is not None
    assert coverage.last_prompt_token == (True, False)
    assert coverage.layers == (1.0, pytest.approx(2 / 3))
    assert coverage.cause == "generation"
