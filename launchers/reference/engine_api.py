"""The contract between the reference model/engine (engine.py) and its HTTP server (server.py).

The engine owns the network, the tokenizer, the chat template and the preallocated KV pool;
the server owns HTTP, SGLang's API shapes, scheduling of requests onto the engine, the memory
limit and SGLang-style log lines.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, Protocol

import numpy as np

WEIGHTS_DIR = Path(__file__).parent / "weights"  # config.json, model.safetensors, tokenizer.json


@dataclass(frozen=True)
class EngineSettings:
    weights_dir: Path = WEIGHTS_DIR
    index_k_dtype: Literal["fp8", "bf16", "fp4"] = "bf16"  # storage of the indexer's compressed keys
    index_topk: int = 512  # compressed blocks (of 4 tokens) each DSA query selects
    context_length: int | None = None  # longest prompt + answer; None: the weights' config default
    max_total_tokens: int | None = None  # KV pool capacity in tokens; None: derived from context_length
    threads: int | None = None  # torch intra-op threads; None: torch's default
    fault: str | None = None  # a planted indexer bug (launchers/reference/faults.py); None: none
    prefix_cache: bool = True  # reuse finished prompts' KV pages (launchers/reference/prefix_cache.py)


@dataclass(frozen=True)
class StepOutput:
    """One generated token."""

    token_id: int
    text: str  # text delta for this token ("" while a multi-byte character is incomplete)
    finish_reason: Literal["stop", "length"] | None  # set on the last step only
    # Selections of every indexer layer for the query position that produced this token:
    # int32 [n_indexer_layers, index_topk] of compressed-block indices (block b = tokens 4b..4b+3),
    # padded with -1 where fewer blocks exist. None unless return_indexer_topk was asked.
    indexer_topk: np.ndarray | None = None
    cached_tokens: int = 0  # prompt tokens taken from the prefix cache, not prefilled


class PoolTooSmall(Exception):
    """The request needs more KV slots than the whole pool has: it can never be admitted."""


class EngineOutOfMemory(Exception):
    """The allocator failed during prefill or decode (a real allocation failure, not a prediction)."""

    def __init__(self, phase: Literal["prefill", "decode"], detail: str):
        super().__init__(f"{phase}: {detail}")
        self.phase = phase


class Engine(Protocol):
    settings: EngineSettings
    model_name: str  # served model name, e.g. "recall-eval/reference-dsa"
    version: str  # engine version string reported by /server_info
    context_length: int
    max_total_tokens: int  # KV pool capacity in tokens
    kv_bytes_per_token: int  # pool bytes per token at the chosen index_k_dtype
    n_indexer_layers: int
    eos_token_id: int

    def chat_prompt(self, messages: list[dict[str, str]], add_generation_prompt: bool = True) -> str:
        """Render messages with the model's chat template."""
        ...

    def encode(self, text: str) -> list[int]: ...

    def decode(self, token_ids: list[int]) -> str: ...

    def generate(
        self,
        prompt_ids: list[int],
        max_new_tokens: int,
        return_indexer_topk: bool = False,
        ignore_eos: bool = False,
    ) -> Iterator[StepOutput]:
        """Greedy generation (past the eos token too with ignore_eos). Blocks until the pool has room
        for prompt + max_new_tokens (raises PoolTooSmall if it never can); frees the slots when the
        iterator ends or is closed.
        Raises EngineOutOfMemory when an allocation fails."""
        ...
