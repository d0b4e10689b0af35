"""SGLang 0.5.23's fp4 indexer kernels, run on CPU tensors in a child process under TRITON_INTERPRET=1.

Triton decides at import time of a kernel's module whether it is interpreted, so the kernels run in
a fresh interpreter with the switch set (whatever this test process imported before). Tensors go
both ways through torch.save files.

    python -m tests.launchers.dsa.sglang_fp4 IN OUT     (IN: a list of requests, OUT: their results)
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import torch

ROOT = Path(__file__).resolve().parents[3]


def call(requests: list[dict[str, Any]], workdir: Path) -> list[Any]:
    """Run the requests in a child process; each is {"op": "quantize", "x", "rne"} -> (codes int8
    (n, 64), packed exponents int32 (n,)) or {"op": "store", "cache", "writes": [(keys, loc)]} ->
    the cache after store_fp4_index_k_cache(rne=False, page_size=64) of every write in order."""
    src, out = workdir / "sglang_fp4_in.pt", workdir / "sglang_fp4_out.pt"
    torch.save(requests, src)
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-m", "tests.launchers.dsa.sglang_fp4", str(src), str(out)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    if done.returncode != 0:
        raise AssertionError(f"SGLang's fp4 kernels failed under TRITON_INTERPRET=1:\n{done.stderr[-3000:]}")
    return torch.load(out)


def _serve(src: Path, out: Path) -> None:
    from sglang.kernels.ops.kvcache.dsv4_fp4_index_k_cache import store_fp4_index_k_cache
    from sglang.kernels.ops.quantization.fp4_indexer_quant import quantize_fp4_indexer_tensor

    results: list[Any] = []
    for request in torch.load(src):
        if request["op"] == "quantize":
            results.append(quantize_fp4_indexer_tensor(request["x"], rne=request["rne"]))
        else:
            cache = request["cache"].clone()
            for keys, loc in request["writes"]:
                store_fp4_index_k_cache(keys, cache, loc, page_size=request["page_size"], rne=False)
            results.append(cache)
    torch.save(results, out)


if __name__ == "__main__":
    if os.environ.get("TRITON_INTERPRET") != "1":
        sys.exit("run with TRITON_INTERPRET=1 (Triton reads it when a kernel's module is imported)")
    _serve(Path(sys.argv[1]), Path(sys.argv[2]))
