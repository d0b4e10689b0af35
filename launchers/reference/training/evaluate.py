"""Needle recall of the reference model: context length x index-key dtype x index_topk.

Cases come from the needle suite (suites.needle.needle_recipes, pool="eval": values and key
names the training data never contains). Each case's filler is sized so that the rendered
prompt (chat template + generation prompt) has at most `length` tokens of our tokenizer, as
close as the filler's word steps allow. The answer is the model's greedy continuation until
<|end|> (at most 24 tokens), scored by recall_eval.scoring (the expected value, case-insensitive).

    python -m launchers.reference.training.evaluate --device cuda --out eval.json --md eval.md
    python -m launchers.reference.training.evaluate --engine --lengths 4096 --dtypes bf16 --topks 512   # CPU engine

--device runs the batched greedy decoder (greedy.py, the training code path, fp32); --engine runs
the served engine itself (KV pool, prefill + decode), one case at a time.
"""

from __future__ import annotations

import argparse
import functools
import json
import multiprocessing as mp
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import torch

from launchers.reference.engine_api import WEIGHTS_DIR, EngineSettings
from launchers.reference.tokenizer import ChatTokenizer
from recall_eval.scoring import score_answer

DEFAULT_LENGTHS = (338, 512, 1024, 2048, 3072, 4096, 6144, 8192, 12288, 16384, 22597)
DEFAULT_DEPTHS = tuple(float(d) for d in range(0, 101, 11))  # 10 depths, 0..99 %
MAX_NEW = 24


@dataclass(frozen=True)
class EvalCase:
    length: int
    depth: float
    trial: int
    ids: list[int]
    expected: tuple[str, ...]
    value_tokens: tuple[int, int] = (0, 0)  # token span of the fact's value in ids (analysis only)


@functools.cache
def _recipes(params: object) -> list:
    from suites.needle import needle_recipes  # offline tooling: see corpus.py

    return needle_recipes(params)  # type: ignore[arg-type]


def _calibrate(job: tuple[object, int, str]) -> EvalCase:
    """Largest filler whose rendered prompt fits in target_tokens (prompt length is monotone in words)."""
    params, index, tok_path = job
    recipe = _recipes(params)[index]
    tok = ChatTokenizer(Path(tok_path))

    def ids_for(words: int) -> list[int]:
        case = recipe.render(words)
        return tok.encode(tok.chat_prompt([{"role": m.role, "content": m.content} for m in case.messages]))

    target = recipe.target_tokens
    words = recipe.words_guess(1.19)
    for _ in range(8):  # secant steps towards the target
        n = len(ids_for(words))
        if n == target:
            break
        words = max(0, words + round((target - n) / 1.19))
    while words > 0 and len(ids_for(words)) > target:
        words -= 1
    while len(ids_for(words + 1)) <= target:
        words += 1
    case = recipe.render(words)
    text = tok.chat_prompt([{"role": m.role, "content": m.content} for m in case.messages])
    offsets = tok.tokenizer.encode(text, add_special_tokens=False).offsets
    assert case.needle is not None
    start = text.index(case.messages[0].content) + case.needle.char_start
    end = start + case.needle.char_end - case.needle.char_start
    span = [i for i, (a, b) in enumerate(offsets) if b > start and a < end]
    return EvalCase(
        target, case.depth_percent, case.trial, ids_for(words), case.expected, (span[0], span[-1] + 1)
    )


def build_cases(
    lengths: Sequence[int], depths: Sequence[float], trials: int, seed: int, workers: int
) -> list[EvalCase]:
    from suites.needle import NeedleParams

    params = NeedleParams(tuple(lengths), tuple(depths), trials, seed, pool="eval")
    jobs = [(params, i, str(WEIGHTS_DIR / "tokenizer.json")) for i in range(len(_recipes(params)))]
    if workers <= 1:
        return [_calibrate(j) for j in jobs]
    with mp.get_context("fork").Pool(workers) as pool:
        return pool.map(_calibrate, jobs, chunksize=4)


def _score(answer: str, case: EvalCase, finished: bool) -> bool:
    outcome, _ = score_answer(answer, case.expected, finish_reason=None if finished else "length")
    return outcome == "pass"


def run_batched(
    cases: list[EvalCase],
    dtypes: Sequence[str],
    topks: Sequence[int],
    device: str,
    batch: int,
    weights: Path,
    partial: Path | None = None,
) -> list[dict]:
    """Batched greedy decoding on `device`; rows are also written to `partial` after each length."""
    from launchers.reference.model import ReferenceModel
    from launchers.reference.training.greedy import greedy_from_states, prompt_states

    torch.backends.cuda.matmul.allow_tf32 = False
    model = ReferenceModel.load(weights, device=device)
    tok = ChatTokenizer(weights / "tokenizer.json")
    rows = []
    for length in sorted({c.length for c in cases}):
        group = [c for c in cases if c.length == length]
        passes: dict[tuple[str, int], list[bool]] = {(d, k): [] for d in dtypes for k in topks}
        for i in range(0, len(group), batch):
            part = group[i : i + batch]
            prompts = [c.ids for c in part]
            tokens, x = prompt_states(model, prompts, tok.pad_token_id, torch.device(device))
            for dtype in dtypes:
                for topk in topks:
                    outs = greedy_from_states(
                        model, tokens, x, [len(p) for p in prompts], MAX_NEW, topk, dtype, tok.eos_token_id
                    )  # type: ignore[arg-type]
                    passes[(dtype, topk)].extend(
                        _score(tok.decode(o), c, len(o) < MAX_NEW) for o, c in zip(outs, part, strict=True)
                    )
        for (dtype, topk), p in passes.items():
            rows.append(_row(length, dtype, topk, p, group))
            print(json.dumps(rows[-1]), flush=True)
        if partial is not None:
            partial.write_text(json.dumps({"meta": {"partial": True}, "rows": rows}, indent=1) + "\n")
    return rows


def run_engine(
    cases: list[EvalCase],
    dtypes: Sequence[str],
    topks: Sequence[int],
    threads: int | None,
    weights: Path,
    partial: Path | None = None,
) -> list[dict]:
    """The served engine, one case at a time; variants of one dtype share the prefill (rewind).
    Rows are also written to `partial` after each length."""
    from launchers.reference.engine import ReferenceEngine
    from launchers.reference.inference import SequenceState

    engines = {
        d: ReferenceEngine(EngineSettings(weights_dir=weights, index_k_dtype=d, threads=threads))  # type: ignore[arg-type]
        for d in dtypes
    }
    rows = []
    for length in sorted({c.length for c in cases}):
        group = [c for c in cases if c.length == length]
        passes: dict[tuple[str, int], list[bool]] = {(d, k): [] for d in dtypes for k in topks}
        for case in group:
            for dtype, engine in engines.items():
                runner, tok = engine.runner, engine.tokenizer
                pages = engine.pool.allocate(len(case.ids) + MAX_NEW)
                try:
                    seq = SequenceState(pages)
                    runner.prefill(seq, case.ids)
                    snap = seq.snapshot()
                    for topk in topks:
                        seq.restore(snap)
                        out: list[int] = []
                        logits, _ = runner.next_logits(seq, topk)
                        while len(out) < MAX_NEW:
                            token = int(logits.argmax())
                            if token == engine.eos_token_id:
                                break
                            out.append(token)
                            runner.append(seq, token)
                            logits, _ = runner.next_logits(seq, topk)
                        passes[(dtype, topk)].append(_score(tok.decode(out), case, len(out) < MAX_NEW))
                finally:
                    engine.pool.release(pages)
        for (dtype, topk), p in passes.items():
            rows.append(_row(length, dtype, topk, p, group))
            print(json.dumps(rows[-1]), flush=True)
        if partial is not None:
            partial.write_text(json.dumps({"meta": {"partial": True}, "rows": rows}, indent=1) + "\n")
    return rows


def selection_report(
    cases: list[EvalCase], topks: Sequence[int], threads: int | None, weights: Path
) -> list[dict]:
    """At the last prompt position, per DSA layer: where the needle's blocks rank among the
    candidates with bf16 and with fp8 index keys, the indexer-logit margin between the best
    needle block and the best other block, and how many of the top-k blocks the two dtypes share."""
    from launchers.reference.engine import ReferenceEngine
    from launchers.reference.inference import SequenceState

    engines = {
        d: ReferenceEngine(EngineSettings(weights_dir=weights, index_k_dtype=d, threads=threads))
        for d in ("bf16", "fp8")
    }  # type: ignore[arg-type]
    rows = []
    for case in cases:
        scores: dict[str, list[torch.Tensor]] = {}
        for dtype, engine in engines.items():
            pages = engine.pool.allocate(len(case.ids))
            try:
                seq = SequenceState(pages)
                engine.runner.prefill(seq, case.ids)
                scores[dtype] = []
                engine.runner.next_logits(seq, 1, scores[dtype])
            finally:
                engine.pool.release(pages)
        needle = torch.arange(case.value_tokens[0] // 4, (case.value_tokens[1] - 1) // 4 + 1)
        for layer, (s16, s8) in enumerate(zip(scores["bf16"], scores["fp8"], strict=True)):
            row: dict = {"length": len(case.ids), "depth": case.depth, "layer": layer}
            for name, s in (("bf16", s16), ("fp8", s8)):
                inside = needle[needle < len(s)]
                if not len(inside):
                    continue
                best = s[inside].max()
                others = s.clone()
                others[inside] = float("-inf")
                row[f"{name}_rank"] = int((s > best).sum()) + 1
                row[f"{name}_margin"] = round(float(best - others.max()), 4)
            for k in topks:
                a = set(torch.topk(s16, min(k, len(s16))).indices.tolist())
                b = set(torch.topk(s8, min(k, len(s8))).indices.tolist())
                row[f"shared_top{k}"] = round(len(a & b) / max(1, len(a)), 4)
            row["max_abs_logit_diff"] = round(float((s16 - s8).abs().max()), 5)
            rows.append(row)
            print(json.dumps(row), flush=True)
    return rows


def _row(length: int, dtype: str, topk: int, passes: list[bool], group: list[EvalCase]) -> dict:
    return {
        "length": length,
        "dtype": dtype,
        "index_topk": topk,
        "cases": len(passes),
        "passes": sum(passes),
        "recall": round(sum(passes) / max(1, len(passes)), 4),
        "prompt_tokens_min": min(len(c.ids) for c in group),
        "prompt_tokens_max": max(len(c.ids) for c in group),
    }


def markdown_table(rows: list[dict]) -> str:
    variants = sorted({(r["dtype"], r["index_topk"]) for r in rows}, key=lambda v: (v[0] != "bf16", v[1]))
    lengths = sorted({r["length"] for r in rows})
    cell = {(r["length"], r["dtype"], r["index_topk"]): r for r in rows}
    head = "| prompt tokens | " + " | ".join(f"{d} k={k}" for d, k in variants) + " |"
    lines = [head, "|" + "---|" * (len(variants) + 1)]
    for n in lengths:
        vals = []
        for d, k in variants:
            r = cell.get((n, d, k))
            vals.append(f"{100 * r['recall']:.0f}% ({r['passes']}/{r['cases']})" if r else "")
        lines.append(f"| {n} | " + " | ".join(vals) + " |")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(
        prog="python -m launchers.reference.training.evaluate", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--lengths", default=",".join(map(str, DEFAULT_LENGTHS)))
    parser.add_argument("--depths", default=",".join(f"{d:g}" for d in DEFAULT_DEPTHS))
    parser.add_argument("--trials", type=int, default=5)
    parser.add_argument("--seed", type=int, default=20260)
    parser.add_argument("--dtypes", default="bf16,fp8")
    parser.add_argument("--topks", default="64,128,256,512,1024")
    parser.add_argument("--device", default="cpu")
    parser.add_argument(
        "--engine",
        action="store_true",
        help="evaluate the served engine (CPU) instead of the batched decoder",
    )
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument(
        "--selections",
        action="store_true",
        help="report needle-block ranks and fp8/bf16 top-k overlap instead",
    )
    parser.add_argument("--batch", type=int, default=50)
    parser.add_argument("--workers", type=int, default=max(1, (mp.cpu_count() or 2) - 1))
    parser.add_argument("--weights", type=Path, default=WEIGHTS_DIR)
    parser.add_argument("--out", type=Path, default=None, help="JSON results")
    parser.add_argument("--md", type=Path, default=None, help="markdown table")
    args = parser.parse_args()
    t0 = time.time()
    cases = build_cases(
        [int(n) for n in args.lengths.split(",")],
        [float(d) for d in args.depths.split(",")],
        args.trials,
        args.seed,
        args.workers,
    )
    print(f"{len(cases)} cases calibrated in {time.time() - t0:.1f}s", flush=True)
    dtypes, topks = args.dtypes.split(","), [int(k) for k in args.topks.split(",")]
    rows: list[dict] = []
    if args.selections:
        rows = selection_report(cases, topks, args.threads, args.weights)
        if args.out:
            args.out.write_text(json.dumps({"rows": rows}, indent=1) + "\n")
        return
    if args.engine:
        rows = run_engine(cases, dtypes, topks, args.threads, args.weights, args.out)
    else:
        rows = run_batched(cases, dtypes, topks, args.device, args.batch, args.weights, args.out)
    meta = {
        "seed": args.seed,
        "trials": args.trials,
        "depths": args.depths,
        "mode": "engine" if args.engine else f"batched:{args.device}",
        "seconds": round(time.time() - t0, 1),
    }
    if args.out:
        args.out.write_text(json.dumps({"meta": meta, "rows": rows}, indent=1) + "\n")
    table = markdown_table(rows)
    if args.md:
        args.md.write_text(table)
    print(table)


if __name__ == "__main__":
    main()
