"""validate_on_gpu.py end to end at tiny sizes (Triton's CPU interpreter here, the GPU on the device):
every section of KERNELS.md is produced from measured numbers, every launch shape is swept, and the
read-only floor kernel it compares against reads the keys it is meant to read."""

from __future__ import annotations

import json
from pathlib import Path

import torch

from launchers.sglang.kernels import layout
from launchers.sglang_gpu_checks import kernel_bench as kb
from launchers.sglang_gpu_checks import validate_on_gpu

DEVICE = torch.device("cuda" if torch.cuda.is_available() else "cpu")


def test_quick_validation_writes_every_section(tmp_path: Path) -> None:
    md, js = tmp_path / "KERNELS.md", tmp_path / "kernels.json"
    validate_on_gpu.main(["--quick", "--md", str(md), "--json", str(js)])
    text, result = md.read_text(), json.loads(js.read_text())
    for heading in ("## Correctness", "## Decode", "### Short calls", "## Prefill", "## Targets", "## Launch-shape sweep"):  # fmt: skip
        assert heading in text
    sizes = validate_on_gpu.QUICK
    assert len(result["decode"]) == len(sizes["decode_keys"]) * len(sizes["decode_batches"])
    assert all(row[kind]["ms"] > 0 for row in result["decode"] for kind in ("bf16", "fp8"))
    assert [(r["keys"], r["batch"]) for r in result["short_calls"]] == sizes["short_call_points"]
    assert all(
        r[k]["ms"] > 0
        for r in result["short_calls"]
        for k in ("floor", "plain", "pdl", "chosen", "chosen_256mib", "same_size_copy")
    )
    extra = validate_on_gpu.BF16_DECODE_EXTRA  # swept for bf16 only
    swept = len(validate_on_gpu.DECODE_CANDIDATES) + len(validate_on_gpu.RAGGED_CANDIDATES)
    assert len(result["sweep"]) == 2 * swept + len(extra)
    assert sum(line.startswith("decode bf16 ") for line in result["sweep"]) == len(
        validate_on_gpu.DECODE_CANDIDATES
    ) + len(extra)
    assert sum(" pdl" in line for line in result["sweep"]) == 2 * sum(
        c.pdl for c in validate_on_gpu.DECODE_CANDIDATES
    ) + sum(c.pdl for c in extra)
    assert {text for _, text in result["targets"]} and all(c["all_written"] for c in result["logits_checks"])


def test_a_saved_run_renders_again_without_a_gpu(tmp_path: Path) -> None:
    """`--from-json` re-renders the committed H100 run (KERNELS.md's tables) from its numbers alone, and
    its targets come out as they did on the device (the 80% decode target failed there)."""
    saved = Path(validate_on_gpu.__file__).with_name("kernels_h100.json")
    md = tmp_path / "KERNELS.md"
    assert validate_on_gpu.main(["--from-json", str(saved), "--md", str(md)]) == 1
    text = md.read_text()
    assert "# Index-K kernels on NVIDIA H100 80GB HBM3" in text and "| 1048576 | 64 |" in text
    assert "- FAIL: bf16 decode 128K keys x 1: 75.0% of copy bandwidth >= 80%" in text
    assert "| triton bf16 | 22528 | 1.68 | 617 | 88% |" in text
    # the short-call row with its launch overhead and the same-size copy beside it
    assert "| 131072 | 1 | 512 | 1.16 | 14.92 | 75% | 81% |" in text and "| 13.24 | 84% | 1.13 |" in text


def test_read_floor_kernel_sums_each_key_of_the_pages_it_walks() -> None:
    pool = kb.random_pool("bf16", 6, DEVICE, seed=1)
    table = torch.tensor([[4, 1, 5]], dtype=torch.int32, device=DEVICE)
    out = torch.full((1, 3 * 64), float("nan"), device=DEVICE)
    rows = layout.as_page_rows(pool).view(torch.bfloat16)
    kb.read_floor_kernel[(1, 1, 2)](rows, table, out, 3, 2, 3, D=128, PAGE_SIZE=64, NUM_STAGES=2)
    keys = rows.view(6, 64, 128).float()[table[0].long()].reshape(3 * 64, 128)
    torch.testing.assert_close(out[0], keys.sum(1), rtol=1e-4, atol=1e-3)
