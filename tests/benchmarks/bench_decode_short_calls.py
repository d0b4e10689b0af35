"""Where the time of a short decode call goes: the bf16 paged-logits kernel against a read-only floor.

    python tests/benchmarks/bench_decode_short_calls.py [--points 131072x1 262144x1 131072x4]

One request's 128K keys are 32 MiB: 7.8 us at the H200's copy bandwidth, so a few microseconds of
launch and ramp decide whether a call reaches 60% of it. For each point (keys x batch) this prints the
time per call of
- `floor`: a kernel with the same grid, page-table reads and logits writes as the decode kernel, that
  only sums the keys (no dot products): the most any key-reading kernel of this shape can do;
- the decode kernel with the tuned launch shape without programmatic dependent launch, then with it (PDL:
  a call's launch overlaps the previous kernel's tail), with the evict-first hint on keys, and with both.
Timing is kernel_bench.time_decode's: CUDA-graph replays of many calls on disjoint shuffled pages, L2
flushed before each replay, `--rotation-mib` of distinct keys read per replay.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path

import torch
from rich.console import Console
from rich.table import Table

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from launchers.sglang.kernels._logits_core import default_config  # noqa: E402
from launchers.sglang_gpu_checks import kernel_bench as kb  # noqa: E402


def parse_point(text: str) -> tuple[int, int]:
    keys, _, batch = text.partition("x")
    return int(keys), int(batch or 1)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--points", nargs="+", type=parse_point, default=[(131072, 1), (262144, 1), (131072, 4), (524288, 1), (65536, 64)])  # fmt: skip
    parser.add_argument("--rotation-mib", type=int, nargs="+", default=[256, 1024])
    args = parser.parse_args()
    if not torch.cuda.is_available():
        print("needs a CUDA GPU", file=sys.stderr)
        return 2
    device = torch.device("cuda")
    copy = kb.copy_bandwidth_gbs(device, 4 << 30)
    pages = kb.decode_pool_pages(max(k * b for k, b in args.points), device, max(args.rotation_mib) << 20)
    pool = kb.random_pool("bf16", pages, device, 3)
    tuned = default_config("bf16", ragged=False)
    plain = dataclasses.replace(tuned, pdl=False, stream_keys=False)
    variants = {
        "tuned, no pdl": plain,
        "tuned + pdl": dataclasses.replace(plain, pdl=True),
        "tuned + evict-first": dataclasses.replace(plain, stream_keys=True),
        "tuned + pdl + evict-first": dataclasses.replace(plain, pdl=True, stream_keys=True),
    }
    table = Table(title=f"bf16 decode, time per call (copy bandwidth {copy:.0f} GB/s)")
    for column in ("keys x batch", "MiB/replay", "path", "us", "% of copy"):
        table.add_column(column, justify="right")
    for keys, batch in args.points:
        moved = batch * keys * (256 + 4)
        for mib in args.rotation_mib:
            rotation = mib << 20
            rows = [("floor (read only)", kb.time_read_floor(pool, keys, batch, plain, device, rotation).ms)]
            for name, cfg in variants.items():
                rows.append((name, kb.time_decode("bf16", pool, keys, batch, cfg, device, rotation).ms))
            for name, ms in rows:
                table.add_row(
                    f"{keys}x{batch}",
                    str(mib),
                    name,
                    f"{ms * 1e3:.2f}",
                    f"{100 * moved / ms / 1e6 / copy:.0f}%",
                )
    Console(width=140).print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
