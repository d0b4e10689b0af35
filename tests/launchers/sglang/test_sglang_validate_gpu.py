"""The bf16 index-K patch inside SGLang 0.5.23's own DeepSeek-V4 code, on a real GPU (`--sglang` mode).

Quick sizes (a few hundred keys, top-32) so that it runs in seconds; the full-size run with its table is
`python -m launchers.sglang_gpu_checks.validate_on_gpu --sglang` (INTEGRATION.md). Every check of the run must pass:
planner == SGLang's configurator, pool bytes per token, bf16 selections vs the fp32 top-k, and the peak
memory of the prefill's logits within the planner's figure, the index pool's allocation within SGLang's padding
of the configurator's index budget.
"""

from __future__ import annotations

import pytest
import torch

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.sglang,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA"),
]


def test_patch_inside_sglang_passes_every_check_on_the_gpu(sglang_available) -> None:
    from launchers.sglang_gpu_checks import sglang_validate

    result = sglang_validate.run(quick=True, device=torch.device("cuda"))
    failed = [c for c in result.checks if c.ok is False]
    assert not failed, failed
    measured = {(r.kind, r.mode): r for r in result.runs}
    assert set(measured) == {(k, m) for k in ("fp8", "bf16") for m in ("decode", "prefill")}
    bf16 = measured["bf16", "prefill"]
    assert bf16.logits_fn == "ragged_paged_mqa_logits" and bf16.logits_peak_bytes is not None
    assert measured["bf16", "decode"].logits_fn == "paged_mqa_logits"
    assert measured["fp8", "decode"].logits_fn == "fp8_paged_mqa_logits_torch"
    assert any(c.item.startswith("bf16 index pool allocated") and c.ok for c in result.checks)
    assert any(c.item.startswith("bf16 whole pool allocated") for c in result.checks)  # measured on CUDA only
