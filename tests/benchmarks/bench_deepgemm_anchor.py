"""Anchor: this project's bf16 / fp8 index-K kernels against SGLang's production fp8 kernels (DeepGEMM).

    python tests/benchmarks/bench_deepgemm_anchor.py [--md anchor.md] [--json anchor.json] [--deep-gemm-source REPO@COMMIT]
    python tests/benchmarks/bench_deepgemm_anchor.py --from-json anchor.json   # re-render, no GPU

Needs a Hopper GPU and an importable `deep_gemm` (SGLang 0.5.23 pins sgl-deep-gemm==0.2.3.post2); where
it does not import, prints one SKIP line saying why and exits 0. On identical inputs (one fp8 pool, a bf16
pool of the same keys, the same page tables, q and weights) it prints:
- correctness: our fp8 logits against DeepGEMM's on the same bytes (max relative error, top-512 /
  top-1024 overlap), each also against fp64 math on the stored keys;
- decode (KERNELS.md shapes, CUDA-graph replays on disjoint pages): time, GB/s and % of the copy
  bandwidth measured in the same run for DeepGEMM fp8, our fp8 and our bf16, and bf16/DeepGEMM time per
  key; where our bf16's share of copy bandwidth is below DeepGEMM's from 128K keys, the best bf16 launch
  shape of validate_on_gpu's candidates at that point;
- the large decode calls (from 128K keys x 16 requests) fitted as `time = fixed + bytes / rate` per
  kernel: whether a gap in share of copy bandwidth is a per-call cost or a slower stream;
- prefill (causal, keys = tokens / 4): ms of each, DeepGEMM's on keys gathered out of the pool as
  SGLang gathers them (the gather's own time beside it).
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import platform
import sys
import time
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from launchers.sglang.kernels._logits_core import default_config  # noqa: E402
from launchers.sglang_gpu_checks import deepgemm_anchor as da  # noqa: E402
from launchers.sglang_gpu_checks import kernel_bench as kb  # noqa: E402

PAGED_LENGTHS = [4096, 9000, 16384, 65536, 131072, 131072 - 37]
RAGGED = (32768, 1024)  # context, query rows
TOPKS = (512, 1024)
SWEEP_CAPS = (16, 32, 64, 128, 256, 1024)  # bf16 decode: most pages one program walks
SWEEP_STAGES = (2, 3)


def run(args: argparse.Namespace, dg, device: torch.device) -> dict:
    started = time.perf_counter()

    def progress(what: str) -> None:
        print(f"[{time.perf_counter() - started:6.1f} s] {what}", flush=True)

    import triton

    result: dict = {
        "device": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "torch": torch.__version__, "triton": triton.__version__, "python": platform.python_version(),
        "deep_gemm": f"{getattr(dg, '__version__', '?')} from {Path(dg.__file__).parent}",
        "dg_num_sms": dg.get_num_sms(),
        "deep_gemm_source": args.deep_gemm_source,
    }  # fmt: skip
    result["copy_gbs"] = kb.copy_bandwidth_gbs(device, 4 << 30)
    progress(f"copy bandwidth {result['copy_gbs']:.0f} GB/s")
    checks = [
        da.check_paged_against_dg(dg, PAGED_LENGTHS, TOPKS, 71, device),
        da.check_ragged_against_dg(dg, *RAGGED, TOPKS, 72, device),
    ]
    result["checks"] = [dataclasses.asdict(c) for c in checks]
    progress("correctness: " + "; ".join(f"{c.path} err {c.rel_err_ours_vs_dg:.2e}" for c in checks))
    pages = kb.decode_pool_pages(max(args.keys) * max(args.batches), device)
    pools = {"fp8": kb.random_pool("fp8", pages, device, 3)}
    pools["bf16"] = da.bf16_copy_of(pools["fp8"])
    bf16_cfg = default_config("bf16", False)
    if args.bf16_max_pages is not None:
        bf16_cfg = da.fixed_shape(bf16_cfg, max_pages_per_program=args.bf16_max_pages)
    if args.bf16_stages is not None:
        bf16_cfg = da.fixed_shape(bf16_cfg, num_stages=args.bf16_stages)
    if args.bf16_even_splits:
        bf16_cfg = da.fixed_shape(bf16_cfg, even_splits=True)
    result["bf16_decode_config"] = dataclasses.asdict(bf16_cfg)
    result["decode"] = []
    for keys in args.keys:
        for batch in args.batches:
            row = da.decode_row(dg, pools, keys, batch, bf16_cfg, device)
            result["decode"].append(row)
            progress(
                f"decode {keys}x{batch}: dg {row['dg']['ms'] * 1e3:.2f} us, fp8 {row['fp8']['ms'] * 1e3:.2f} "
                f"us, bf16 {row['bf16']['ms'] * 1e3:.2f} us"
            )
    behind = [
        (r["keys"], r["batch"])
        for r in result["decode"]
        if r["keys"] >= 131072 and r["bf16"]["gbs"] < r["dg"]["gbs"]
    ]
    result["split_sweep"] = {"points": behind, "rows": []}
    if behind and not args.no_improve:
        rows = da.bf16_split_sweep(pools["bf16"], behind, bf16_cfg, SWEEP_CAPS, SWEEP_STAGES, device)
        result["split_sweep"]["rows"] = rows
        progress(
            "bf16 split sweep: "
            + "; ".join(
                f"cap {r['max_pages']} st {r['stages']} even {r['even_splits']}: {r['ms']}" for r in rows
            )
        )
    del pools
    torch.cuda.empty_cache()
    result["prefill"] = []
    for tokens in args.prefill:
        result["prefill"].append(da.prefill_rows(dg, tokens, device, 11))
        torch.cuda.empty_cache()
        progress(f"prefill {tokens}: {result['prefill'][-1]}")
    return result


def _row(result: dict, keys: int, batch: int) -> dict:
    return next(r for r in result["decode"] if r["keys"] == keys and r["batch"] == batch)


def _gbs(result: dict, keys: int, batch: int, kind: str) -> float:
    return _row(result, keys, batch)[kind]["gbs"]


def _ms(result: dict, keys: int, batch: int, kind: str) -> float:
    return _row(result, keys, batch)[kind]["ms"]


def _fmt_bf16(cfg: dict | None) -> str:
    if cfg is None:  # saved by the benchmark's first version: the tuned shape of then
        return "the tuned shape (not recorded in this JSON)"
    return (
        f"warps={cfg['num_warps']} stages={cfg['num_stages']} programs/SM={cfg['programs_per_sm']} "
        f"pages/program <= {cfg['max_pages_per_program']}"
        + (" even splits" if cfg.get("even_splits") else "")
        + (" pdl" if cfg["pdl"] else "")
        + (
            f"; calls where that cap binds: stages={cfg['large_call_stages'] or cfg['num_stages']} "
            f"pages/program <= {cfg['large_call_max_pages'] or cfg['max_pages_per_program']}"
            if cfg.get("large_call_stages") or cfg.get("large_call_max_pages")
            else ""
        )
    )


def _render_fit(result: dict) -> list[str]:
    copy = result["copy_gbs"]
    try:
        fits = {col: da.streaming_fit(result["decode"], col) for col in ("dg", "fp8", "bf16")}
    except ValueError:  # too few large calls in this run
        return []
    out = [
        "",
        "Large calls (from 128K keys x 16 requests) fitted as time = fixed + bytes / rate (least squares): "
        "the fixed part is paid once per call, the rate is how fast the kernel streams once running.",
        "",
        "| kernel | calls | fixed us | streaming GB/s | % of copy | r^2 |",
        "|---|---|---|---|---|---|",
    ]
    names = {"dg": "DeepGEMM fp8", "fp8": "our fp8", "bf16": "our bf16"}
    for col, f in fits.items():
        out.append(
            f"| {names[col]} | {f['points']} | {f['fixed_us']:.1f} | {f['rate_gbs']:.0f} | "
            f"{100 * f['rate_gbs'] / copy:.1f}% | {f['r2']:.5f} |"
        )
    return out


def load_result(path: Path) -> dict:
    """A result saved with --json (JSON turns the top-k keys of the overlap dicts into strings)."""
    result = json.loads(path.read_text())
    for check in result["checks"]:
        for field in ("overlap", "overlap_min"):
            check[field] = {int(k): v for k, v in check[field].items()}
    return result


def render(result: dict) -> str:
    copy = result["copy_gbs"]
    out = [
        "## Anchor: SGLang's production fp8 kernels (DeepGEMM) on the same bytes",
        "",
        f"Date {result['date']}; {result['device']}; torch {result['torch']}, triton {result['triton']}, "
        f"python {result['python']}; deep_gemm {result['deep_gemm']} ({result['dg_num_sms']} SMs)"
        + (f", built from {result['deep_gemm_source']}" if result.get("deep_gemm_source") else "")
        + ". "
        "Produced by `python tests/benchmarks/bench_deepgemm_anchor.py` in one run. Copy bandwidth "
        f"(device-to-device, read + write): **{copy:.0f} GB/s**.",
        "",
        "### Correctness: our fp8 logits against DeepGEMM's, same pool bytes, q and weights",
        "",
        "Error is max over rows of max|a - b| / max|b|; 'vs stored' is against fp64 math on the keys as the "
        "pool stores them; overlap is |top-k(ours) & top-k(DeepGEMM)| / k.",
        "",
        "| path | rows | max len | DeepGEMM finite | ours vs DeepGEMM | DeepGEMM vs stored | ours vs stored | "
        + " | ".join(f"top-{k} overlap (mean / min)" for k in TOPKS)
        + " |",
        "|---|---|---|---|---|---|---|" + "---|" * len(TOPKS),
    ]
    for c in result["checks"]:
        overlaps = " | ".join(f"{c['overlap'][k]:.4f} / {c['overlap_min'][k]:.4f}" for k in TOPKS)
        out.append(
            f"| {c['path']} | {c['rows']} | {c['max_len']} | {c['dg_all_finite']} | {c['rel_err_ours_vs_dg']:.2e} "
            f"| {c['rel_err_dg_vs_stored']:.2e} | {c['rel_err_ours_vs_stored']:.2e} | {overlaps} |"
        )
    out += [
        "",
        "### Decode: one call (one layer), CUDA-graph replays, every request on its own shuffled pages",
        "",
        "Bytes = keys x (pool bytes per token + 4 logits bytes): 136 for fp8, 260 for bf16. DeepGEMM's "
        "schedule is made once outside the graph (SGLang makes it once per step for all layers). Our "
        f"bf16 launch shape: {_fmt_bf16(result.get('bf16_decode_config'))}.",
        "",
        "| keys | batch | DeepGEMM fp8 us | GB/s | % of copy | our fp8 us | % of copy | our bf16 us | GB/s | "
        "% of copy | bf16 / DeepGEMM time per key | our fp8 / DeepGEMM |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in result["decode"]:
        d, f, b = r["dg"], r["fp8"], r["bf16"]
        out.append(
            f"| {r['keys']} | {r['batch']} | {d['ms'] * 1e3:.1f} | {d['gbs']:.0f} | {100 * d['gbs'] / copy:.0f}% | "
            f"{f['ms'] * 1e3:.1f} | {100 * f['gbs'] / copy:.0f}% | {b['ms'] * 1e3:.1f} | {b['gbs']:.0f} | "
            f"{100 * b['gbs'] / copy:.0f}% | {b['ms'] / d['ms']:.2f} | {f['ms'] / d['ms']:.2f} |"
        )
    out += _render_fit(result)
    sweep = result.get("split_sweep") or {"rows": []}
    if sweep["rows"]:
        points = [tuple(p) for p in sweep["points"]]
        out += [
            "",
            "Where our bf16's share of copy bandwidth is below DeepGEMM's (from 128K keys): bf16 with other caps on "
            "pages per program (how finely a large call is cut into programs), pipeline depths and even splits "
            "(the same number of splits, of equal length), same run. Cells: us, % of copy bandwidth, programs "
            "in the grid (DeepGEMM's share at that point in the header). Where even splits leave the grid as "
            "it was, the pair of rows times the same kernel twice: their difference is the timing noise.",
            "",
            "| pages/program cap | stages | even splits | "
            + " | ".join(f"{k}x{b} (DG {100 * _gbs(result, k, b, 'dg') / copy:.1f}%)" for k, b in points)
            + " |",
            "|---|---|---|" + "---|" * len(points),
        ]
        for r in sweep["rows"]:
            cells = [
                f"{ms * 1e3:.1f}, {100 * _gbs(result, k, b, 'bf16') * _ms(result, k, b, 'bf16') / ms / copy:.1f}%, "
                f"{n}"
                for (k, b), ms, n in zip(points, r["ms"], r["programs"], strict=True)
            ]
            even = "yes" if r["even_splits"] else "no"
            out.append(f"| {r['max_pages']} | {r['stages']} | {even} | " + " | ".join(cells) + " |")
    out += [
        "",
        "### Prefill: one request, causal, keys = tokens / 4",
        "",
        "DeepGEMM's `fp8_mqa_logits` reads keys gathered into contiguous `k_fp8` / `k_scale` (ks = 0, ke = "
        "the row's causal length); the gather column times a torch gather of those pages, a stand-in for "
        "SGLang's own gather kernel. Ours read the pages directly.",
        "",
        "| tokens | keys | DeepGEMM fp8 ms | gather ms | our fp8 ms | our bf16 ms | bf16 / DeepGEMM | "
        "our fp8 / DeepGEMM |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for p in result["prefill"]:
        out.append(
            f"| {p['tokens']} | {p['keys']} | {p['dg']:.2f} | {p['gather']:.3f} | {p['fp8']:.2f} | "
            f"{p['bf16']:.2f} | {p['bf16'] / p['dg']:.2f} | {p['fp8'] / p['dg']:.2f} |"
        )
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keys", type=int, nargs="+", default=[4096, 16384, 65536, 131072, 262144, 524288])
    parser.add_argument("--batches", type=int, nargs="+", default=[1, 4, 16, 64])
    parser.add_argument("--prefill", type=int, nargs="*", default=[22528, 131072])
    parser.add_argument("--no-improve", action="store_true", help="skip the bf16 split sweep")
    parser.add_argument(
        "--deep-gemm-source",
        help="where the deep_gemm under test was built from (repo@commit), recorded in the report",
    )
    parser.add_argument(
        "--bf16-max-pages",
        type=int,
        help="time bf16 decode with this cap on pages per program at every call size (default: the "
        "tuned rule, 32 and 256 for calls where 32 binds)",
    )
    parser.add_argument(
        "--bf16-stages",
        type=int,
        help="time bf16 decode with this pipeline depth at every call size (default: the tuned rule, 2 "
        "and 3 for large calls)",
    )
    parser.add_argument(
        "--bf16-even-splits", action="store_true", help="time bf16 decode with splits of equal length"
    )
    parser.add_argument(
        "--from-json", type=Path, help="re-render the tables of a run saved with --json (no GPU needed)"
    )
    parser.add_argument("--md", type=Path, help="write the markdown section here")
    parser.add_argument("--json", type=Path, help="write every number here")
    args = parser.parse_args(argv)
    if args.from_json:
        text = render(load_result(args.from_json))
        print(text)
        if args.md:
            args.md.write_text(text)
        return 0
    dg, why = da.load_deep_gemm()
    if dg is None:
        print(f"SKIP: {why}. Install DeepGEMM for this torch to run the anchor.")
        return 0
    if not torch.cuda.is_available() or torch.cuda.get_device_capability()[0] < 9:
        print("SKIP: DeepGEMM's fp8 index kernels need a Hopper (sm90) or newer GPU.")
        return 0
    result = run(args, dg, torch.device("cuda"))
    if args.json:  # before rendering: the numbers survive a rendering bug
        args.json.write_text(json.dumps(result, indent=1, default=str))
    text = render(result)
    print(text)
    if args.md:
        args.md.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
