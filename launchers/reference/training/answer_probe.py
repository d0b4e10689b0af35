"""Teacher-forced answer accuracy by answer position, per document kind: where do answers go wrong?

    python -m launchers.reference.training.answer_probe --weights DIR --kinds config:sysctl,multiturn

Greedy recall says only that an answer was wrong. Feeding the true answer and reading the argmax
at each answer position separates two failures: a wrong FIRST token with the rest right is a lookup
(binding) failure, the model copied from the wrong fact; wrong tokens all along, even after the
value's first tokens were given, mean the model does not copy from the document at all.
Held-out training-pool documents (unused seeds, every code and name random), dense DSA attention.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import torch

from launchers.reference.model import ReferenceModel
from launchers.reference.tokenizer import ChatTokenizer
from launchers.reference.training.corpus import ShardSpec, make_shard


def probe(weights: Path, kind: str, n: int, words: tuple[int, int]) -> dict:
    tok_path = str(weights / "tokenizer.json")
    tok = ChatTokenizer(Path(tok_path))
    model = ReferenceModel.load(weights)
    samples = make_shard(ShardSpec(424_000, n, words[0], words[1], (kind,), 1.0, tok_path, 1.0))
    by_position: dict[int, list[bool]] = {}
    exact = 0
    example = None
    for sample in samples:
        ids = torch.tensor(sample.ids, dtype=torch.long)[None]
        qpos = torch.arange(sample.answer_start - 1, len(sample.ids) - 1)[None]
        with torch.no_grad():
            logits, _ = model.forward_train(ids, qpos, None)
        pred = logits.argmax(-1)[0]
        ok = (pred == ids[0, qpos[0] + 1]).tolist()
        exact += all(ok)
        for i, hit in enumerate(ok):
            by_position.setdefault(i, []).append(hit)
        if example is None:
            example = {
                "target": [tok.decode([t]) for t in sample.ids[sample.answer_start :].tolist()],
                "argmax": [tok.decode([t]) for t in pred.tolist()],
            }
    return {
        "kind": kind,
        "documents": len(samples),
        "mean_tokens": round(float(np.mean([len(s.ids) for s in samples]))),
        "teacher_forced_exact": exact,
        "accuracy_by_answer_position": [
            round(float(np.mean(by_position[i])), 2) for i in sorted(by_position)
        ],
        "example": example,
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        prog="python -m launchers.reference.training.answer_probe", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--weights", type=Path, required=True)
    parser.add_argument("--kinds", default="config:sysctl,config:toml,multiturn,needle")
    parser.add_argument("--n", type=int, default=24, help="documents per kind")
    parser.add_argument("--words", default="150,250", help="filler size range (config: 4 words per entry)")
    parser.add_argument("--out", type=Path, default=None, help="JSON file to write")
    args = parser.parse_args()
    torch.set_num_threads(2)
    lo, hi = (int(x) for x in args.words.split(","))
    results = [probe(args.weights, kind, args.n, (lo, hi)) for kind in args.kinds.split(",")]
    for r in results:
        print(json.dumps(r))
    if args.out:
        args.out.write_text(json.dumps(results, indent=1) + "\n")


if __name__ == "__main__":
    main()
