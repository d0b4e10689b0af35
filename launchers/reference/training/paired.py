"""Paired tests for the model card: two weights on the same sweep, or long_recall's cells against one.

    python -m launchers.reference.training.paired runs RUN_A RUN_B          # two `recall-eval sweep` runs
    python -m launchers.reference.training.paired cells LONG.json --ref bf16/2048 [--faulty FAULT.json]

`runs` pairs the cases of two sweep run directories by case id (the same grid and seed give the same
cases) and prints, per suite and pooled, passes of each, the discordant counts and the exact McNemar p.
`cells` pairs every (dtype, index_topk) cell of a long_recall file with the reference cell, case by case
(case id), per length and pooled over lengths; with --faulty, every cell of that
file (a `--fault` run) with the same cell of LONG.json, i.e. faulty against correct at the same setting.
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from pathlib import Path

from recall_eval.stats import mcnemar_exact


def _results(run: Path) -> dict[str, dict]:
    files = [run / "results.jsonl"] if (run / "results.jsonl").exists() else list(run.glob("*/results.jsonl"))
    if len(files) != 1:
        raise SystemExit(f"error: expected one results.jsonl under {run}, found {len(files)}")
    rows = [json.loads(line) for line in files[0].read_text().splitlines() if line.strip()]
    return {r["case_id"]: r for r in rows}


def _line(label: str, a: list[bool], b: list[bool]) -> dict:
    only_a = sum(x and not y for x, y in zip(a, b, strict=True))
    only_b = sum(y and not x for x, y in zip(a, b, strict=True))
    return {
        "group": label,
        "cases": len(a),
        "pass_a": sum(a),
        "pass_b": sum(b),
        "only_a": only_a,
        "only_b": only_b,
        "p": round(mcnemar_exact(only_a, only_b), 4),
    }


def pair_runs(run_a: Path, run_b: Path) -> list[dict]:
    a, b = _results(run_a), _results(run_b)
    if set(a) != set(b):
        raise SystemExit("error: the two runs do not hold the same cases (grid or seed differ)")
    by_suite: dict[str, list[str]] = defaultdict(list)
    for cid, row in a.items():
        by_suite[row["suite"]].append(cid)
    lines = []
    for suite, ids in [*sorted(by_suite.items()), ("pooled", list(a))]:
        lines.append(
            _line(suite, [a[i]["outcome"] == "pass" for i in ids], [b[i]["outcome"] == "pass" for i in ids])
        )
    return lines


def _cells(path: Path) -> dict[tuple[str, int], dict[tuple, bool]]:
    out: dict[tuple[str, int], dict[tuple, bool]] = defaultdict(dict)
    for r in json.loads(path.read_text())["rows"]:
        key = (r["suite"], r["target_tokens"], r["case_id"])
        out[(r["dtype"], int(r["index_topk"]))][key] = bool(r["pass"])
    return out


def pair_cells(path: Path, ref: str, faulty: Path | None) -> list[dict]:
    cells = _cells(path)
    if faulty is not None:
        pairs = [(cell, cells[cell], cases) for cell, cases in _cells(faulty).items()]
    else:
        dtype, _, topk = ref.partition("/")
        pairs = [(cell, cells[(dtype, int(topk))], cases) for cell, cases in cells.items()]
    lines = []
    for (dtype, topk), ref_cases, cases in sorted(pairs):
        keys = sorted(set(cases) & set(ref_cases))
        for length in sorted({k[1] for k in keys}) + [None]:
            sel = [k for k in keys if length is None or k[1] == length]
            line = _line(
                f"{dtype}/{topk}@{length or 'all'}", [ref_cases[k] for k in sel], [cases[k] for k in sel]
            )
            lines.append(line)
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(
        prog="python -m launchers.reference.training.paired", description=__doc__.split("\n")[0]
    )
    sub = parser.add_subparsers(dest="cmd", required=True)
    p_runs = sub.add_parser("runs")
    p_runs.add_argument("run_a", type=Path)
    p_runs.add_argument("run_b", type=Path)
    p_cells = sub.add_parser("cells")
    p_cells.add_argument("long_recall", type=Path)
    p_cells.add_argument("--ref", default="bf16/2048", help="reference cell DTYPE/TOPK")
    p_cells.add_argument("--faulty", type=Path, default=None, help="a long_recall --fault file")
    p_cells.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    if args.cmd == "runs":
        lines = pair_runs(args.run_a, args.run_b)
    else:
        lines = pair_cells(args.long_recall, args.ref, args.faulty)
        if args.out:
            args.out.write_text(json.dumps(lines, indent=1) + "\n")
    print("| group | cases | pass A (ref) | pass B | A only | B only | exact McNemar p |")
    print("|---|---|---|---|---|---|---|")
    for x in lines:
        print(
            f"| {x['group']} | {x['cases']} | {x['pass_a']} | {x['pass_b']} | {x['only_a']} | {x['only_b']} | {x['p']:.3g} |"
        )


if __name__ == "__main__":
    main()
