"""How much a misapplied quantisation scale moves the indexer, with the served engine (CPU).

    python -m launchers.reference.training.scale_probe --lengths 4096,8192 --depths 25,50,75,95

For needle cases (the suite's evaluation pool, calibrated to the engine's tokenizer), at the last
prompt position and for each DSA layer: the indexer logits with the keys read correctly and with the
planted faults scale_block (the next key's / block's scale) and scale_page (the scale of the same slot
in the next 64-key page, SGLang's paged layout), at fp8 and fp4. Prints one JSON row per case, layer,
dtype and fault: the largest logit change, the needle's margin over the best other block, and the
needle's rank without and with the fault; --out keeps them.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch

from launchers.reference.engine import ReferenceEngine
from launchers.reference.engine_api import WEIGHTS_DIR, EngineSettings
from launchers.reference.inference import SequenceState
from launchers.reference.training.evaluate import build_cases

FAULTS = ("scale_block", "scale_page")


def _scores(engine: ReferenceEngine, ids: list[int], fault: str | None) -> list[torch.Tensor]:
    pages = engine.pool.allocate(len(ids))
    try:
        seq = SequenceState(pages)
        engine.runner.prefill(seq, ids)
        engine.runner.fault = fault
        scores: list[torch.Tensor] = []
        engine.runner.next_logits(seq, 1, scores)
        return scores
    finally:
        engine.runner.fault = None
        engine.pool.release(pages)


def _rank_margin(s: torch.Tensor, needle: torch.Tensor) -> tuple[int, float]:
    inside = needle[needle < len(s)]
    best = s[inside].max()
    others = s.clone()
    others[inside] = float("-inf")
    return int((s > best).sum()) + 1, float(best - others.max())


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--lengths", default="4096,8192")
    parser.add_argument("--depths", default="25,50,75,95")
    parser.add_argument("--weights", type=Path, default=WEIGHTS_DIR)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    lengths = tuple(int(n) for n in args.lengths.split(","))
    depths = tuple(float(d) for d in args.depths.split(","))
    cases = build_cases(lengths, depths, 1, 0, 1)
    rows = []
    for dtype in ("fp8", "fp4"):
        engine = ReferenceEngine(
            EngineSettings(weights_dir=args.weights, index_k_dtype=dtype, prefix_cache=False)  # type: ignore[arg-type]
        )
        for case in cases:
            needle = torch.arange(case.value_tokens[0] // 4, (case.value_tokens[1] - 1) // 4 + 1)
            plain = _scores(engine, case.ids, None)
            for fault in FAULTS:
                for layer, (s, f) in enumerate(zip(plain, _scores(engine, case.ids, fault), strict=True)):
                    if not len(needle[needle < len(s)]):
                        continue  # the needle is in the local window: no candidate to rank
                    rank, margin = _rank_margin(s, needle)
                    faulty_rank, faulty_margin = _rank_margin(f, needle)
                    row = {
                        "dtype": dtype,
                        "fault": fault,
                        "length": len(case.ids),
                        "depth": case.depth,
                        "layer": layer,
                        "max_abs_logit_change": round(float((s - f).abs().max()), 4),
                        "median_abs_logit_change": round(float((s - f).abs().median()), 4),
                        "margin": round(margin, 4),
                        "faulty_margin": round(faulty_margin, 4),
                        "rank": rank,
                        "faulty_rank": faulty_rank,
                    }
                    rows.append(row)
                    print(json.dumps(row), flush=True)
    if args.out:
        args.out.write_text(json.dumps(rows, indent=1) + "\n")


if __name__ == "__main__":
    main()
