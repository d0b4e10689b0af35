"""Architecture of the reference model (weights/config.json holds one of these)."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path


@dataclass(frozen=True)
class ModelConfig:
    vocab_size: int = 4096
    d_model: int = 256
    n_heads: int = 4  # heads of every attention layer (head dim = d_model / n_heads)
    mlp_hidden: int = 768  # SwiGLU inner width
    n_swa_layers: int = 4  # lower, sliding-window layers (RoPE inside the window)
    swa_window: int = 128  # tokens each sliding-window query sees, itself included
    rope_theta: float = 10000.0
    n_dsa_layers: int = 2  # upper, sparse layers; K/V/index keys from the sliding-window stack's output
    dsa_window: int = 64  # local window of a DSA query (block-aligned: 64..67 tokens)
    compress_ratio: int = 4  # tokens per compressed index block
    index_n_heads: int = 8  # H_I
    index_head_dim: int = 128  # D_I (as DeepSeek's indexer and SGLang's kernels)
    context_length: int = 32768  # default longest prompt + answer the engine accepts
    norm_eps: float = 1e-6

    @property
    def head_dim(self) -> int:
        return self.d_model // self.n_heads

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2) + "\n"

    @classmethod
    def load(cls, path: Path) -> ModelConfig:
        data = json.loads(path.read_text())
        known = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        return cls(**known)
