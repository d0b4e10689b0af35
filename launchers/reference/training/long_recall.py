"""Recall of the reference model at long contexts (to 131,072 tokens) on a GPU: suite x length x
index-key dtype x index_topk, with the training code path's batched greedy decoder (greedy.py).

    python -m launchers.reference.training.long_recall --weights DIR --out long.json \
        --suites needle,niah --lengths 8192,32768,131072 --topks 64,256,1024,2048 --dtypes fp8,bf16

Cases are the suites' own (evaluation pools, `recall-eval sweep`'s default seed 0; `niah` stands for
every RULER needle task), calibrated by the sweep's Calibrator against the model's tokenizer and chat
template, in worker processes (a 131,072-token prompt takes a few tokenizer passes). Each case's prompt
goes through the sliding-window stack once; every (dtype, index_topk) then decodes greedily from that
state, up to the case's own answer budget (else --max-tokens), scored as a sweep scores it (the suite's
metric where it has one, e.g. RULER's string_match_all; else the lenient pass/miss verdict). This is the
model card's GPU table; `recall-eval` measures the served CPU engine, which computes the same function
(tests/launchers/reference check the two paths against each other).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing as mp
import time
from collections import defaultdict
from pathlib import Path

import torch

from launchers.reference.engine_api import WEIGHTS_DIR
from launchers.reference.model import ReferenceModel
from launchers.reference.tokenizer import ChatTokenizer
from launchers.reference.training.greedy import greedy_from_states, prompt_states
from launchers.reference.training.topk_recall import SEED, EngineTokenizer, answer_row, markdown
from recall_eval.metrics import METRICS
from recall_eval.scoring import score_answer
from recall_eval.types import Case

DEFAULT_DEPTHS = "0,25,50,75,100"


def suite_names(spec: str) -> list[str]:
    """Comma-separated suites; `niah` expands to RULER's needle tasks."""
    from suites.ruler_niah import NIAH_TASKS  # offline tooling: see corpus.py

    names: list[str] = []
    for name in spec.split(","):
        names.extend(sorted(NIAH_TASKS) if name == "niah" else [name])
    return names


def _calibrate(job: tuple[str, int, float, int, str]) -> Case | None:
    """One calibrated case (suite, length, depth, trial), or None where the suite cannot fit it."""
    import suites  # offline tooling: see corpus.py
    from recall_eval.calibration import Calibrator

    suite, length, depth, trial, tok_path = job
    recipe = [r for r in suites.build_recipes(suite, [length], [depth], trial + 1, SEED) if r.trial == trial][
        0
    ]
    tokenizer = ChatTokenizer(Path(tok_path))
    (case,) = asyncio.run(Calibrator(EngineTokenizer(tokenizer)).calibrate([recipe]))
    return case if case.not_applicable is None else None


def grade(case: Case, answer: str, finish: str) -> tuple[bool, float]:
    """(pass, score) of one answer, as a sweep grades it."""
    if case.metric:
        score = METRICS[case.metric](answer, case.expected, case.params)
        return score >= 1.0, score
    outcome, _ = score_answer(answer, case.expected, case.distractors, finish)
    return outcome == "pass", float(outcome == "pass")


def main() -> None:
    parser = argparse.ArgumentParser(
        prog="python -m launchers.reference.training.long_recall", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--weights", type=Path, default=WEIGHTS_DIR)
    parser.add_argument("--suites", default="needle,niah")
    parser.add_argument("--lengths", default="8192,32768,131072")
    parser.add_argument("--depths", default=DEFAULT_DEPTHS)
    parser.add_argument("--trials", type=int, default=1)
    parser.add_argument("--topks", default="64,256,1024,2048")
    parser.add_argument("--dtypes", default="fp8,bf16")
    parser.add_argument("--max-tokens", type=int, default=32, help="budget of cases without their own")
    parser.add_argument("--batch", type=int, default=8, help="cases per GPU batch")
    parser.add_argument("--workers", type=int, default=14, help="calibration processes")
    parser.add_argument("--device", default="cuda")
    parser.add_argument(
        "--fault",
        default=None,
        choices=("scale_block", "scale_page"),
        help="plant this scale fault (launchers/reference/faults.py) in every fp8/fp4 key read",
    )
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    started = time.perf_counter()
    tok_path = str(args.weights / "tokenizer.json")
    jobs = [
        (suite, int(length), float(depth), trial, tok_path)
        for suite in suite_names(args.suites)
        for length in args.lengths.split(",")
        for depth in args.depths.split(",")
        for trial in range(args.trials)
    ]
    with mp.get_context("spawn").Pool(args.workers) as pool:
        cases = [c for c in pool.map(_calibrate, jobs, chunksize=1) if c is not None]
    print(f"{len(cases)} cases calibrated in {time.perf_counter() - started:.0f}s", flush=True)
    tokenizer = ChatTokenizer(Path(tok_path))
    device = torch.device(args.device)
    model = ReferenceModel.load(args.weights).float().to(device).eval()
    topks = [int(k) for k in args.topks.split(",")]
    rows: list[dict] = []
    table = ""
    by_length: dict[int, list[Case]] = defaultdict(list)
    for case in cases:
        by_length[case.target_tokens].append(case)
    for length in sorted(by_length):
        group = by_length[length]
        for start in range(0, len(group), args.batch):
            batch = group[start : start + args.batch]
            prompts = [
                tokenizer.encode(tokenizer.chat_prompt([m.model_dump() for m in c.messages])) for c in batch
            ]
            budget = max(c.max_tokens or args.max_tokens for c in batch)
            tokens, x = prompt_states(model, prompts, tokenizer.pad_token_id, device)
            for dtype in args.dtypes.split(","):
                for topk in topks:
                    outs = greedy_from_states(
                        model,
                        tokens,
                        x,
                        [len(p) for p in prompts],
                        budget,
                        topk,
                        dtype,
                        tokenizer.eos_token_id,  # type: ignore[arg-type]
                        args.fault,
                    )
                    for case, prompt, out in zip(batch, prompts, outs, strict=True):
                        limit = case.max_tokens or args.max_tokens
                        answer = tokenizer.decode(out[:limit])
                        finish = "length" if len(out) >= limit else "stop"
                        passed, score = grade(case, answer, finish)
                        rows.append(
                            {
                                **answer_row(case, len(prompt), dtype, topk, answer),
                                "fault": args.fault,
                                "expected": list(case.expected),
                                "score": round(score, 4),
                                "pass": passed,
                            }
                        )
            del x
        print(f"length {length}: {len(group)} cases done at {time.perf_counter() - started:.0f}s", flush=True)
        table = _write(args, device, started, rows, topks)  # after every length: a cut-off run keeps them
    print(table)


def _write(args: argparse.Namespace, device: torch.device, started: float, rows: list, topks: list) -> str:
    meta = {
        "seconds": round(time.perf_counter() - started),
        "weights": str(args.weights),
        "device": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
        "args": {k: str(v) for k, v in vars(args).items()},
    }
    table = markdown(rows, topks)
    if args.out:
        args.out.write_text(json.dumps({"meta": meta, "table": table, "rows": rows}, indent=1) + "\n")
    return table


if __name__ == "__main__":
    main()
