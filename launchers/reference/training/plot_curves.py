"""Training curves of one or more consecutive runs (sub-stages) from their train_log.jsonl files.

    python -m launchers.reference.training.plot_curves --out curves.png \
        8a=logs/stage8a_train_log.jsonl 8b=logs/stage8b_train_log.jsonl 8c=logs/stage8c_train_log.jsonl

Two panels, steps counted across the runs in the order given: held-out greedy recall per kind (mean
over the validation lengths) and teacher-forced exact match per kind (the EMA the log records).
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def read_runs(runs: list[tuple[str, Path]]) -> tuple[dict, dict, list[tuple[str, int]]]:
    """(recall[kind] -> [(step, value)], exact[kind] -> [(step, value)], [(label, first step)])."""
    recall: dict[str, list[tuple[int, float]]] = defaultdict(list)
    exact: dict[str, list[tuple[int, float]]] = defaultdict(list)
    starts: list[tuple[str, int]] = []
    offset = 0
    for label, path in runs:
        starts.append((label, offset))
        last = 0
        for line in path.read_text().splitlines():
            record = json.loads(line)
            step = offset + record["step"]
            last = max(last, record["step"])
            if "val_recall" in record:
                by_kind: dict[str, list[float]] = defaultdict(list)
                for name, value in record["val_recall"].items():
                    by_kind[name.split("@")[0]].append(value)
                for kind, values in by_kind.items():
                    recall[kind].append((step, sum(values) / len(values)))
            else:
                for key, value in record.items():
                    kind = key.removesuffix(".tf_exact")
                    # a kind not trained since the last record keeps its EMA: no new point
                    if key.endswith(".tf_exact") and (not exact[kind] or exact[kind][-1][1] != value):
                        exact[kind].append((step, value))
        offset += last
    return recall, exact, starts


def plot(runs: list[tuple[str, Path]], out: Path, title: str) -> None:
    recall, exact, starts = read_runs(runs)
    fig, axes = plt.subplots(1, 2, figsize=(13, 4.6), sharex=True)
    for ax, series, ylabel in (
        (axes[0], recall, "held-out greedy recall (mean over lengths)"),
        (axes[1], exact, "teacher-forced exact match (EMA)"),
    ):
        bounds = [start for _, start in starts[1:]] + [float("inf")]
        for colour, kind in enumerate(sorted(series)):
            label: str | None = kind  # on the kind's first line only
            # one line per run (each run's EMA starts afresh), one colour per kind
            for (_, start), end in zip(starts, bounds, strict=True):
                points = [(s, v) for s, v in series[kind] if start <= s < end]
                if points:
                    steps, values = zip(*points, strict=True)
                    ax.plot(
                        steps, values, color=f"C{colour}", label=label, marker="." if ax is axes[0] else None
                    )
                    label = None
        for name, start in starts:
            ax.axvline(start, color="grey", lw=0.6, ls=":")
            ax.text(start, 1.02, name, fontsize=8, color="grey")
        ax.set_ylim(-0.02, 1.08)
        ax.set_xlabel("step (across sub-stages)")
        ax.set_ylabel(ylabel)
        ax.grid(alpha=0.3)
    axes[1].legend(fontsize=7, loc="lower right")
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(out, dpi=110)


def main() -> None:
    parser = argparse.ArgumentParser(
        prog="python -m launchers.reference.training.plot_curves", description=__doc__.split("\n")[0]
    )
    parser.add_argument(
        "runs", nargs="+", metavar="LABEL=TRAIN_LOG", help="train_log.jsonl per run, in order"
    )
    parser.add_argument("--out", type=Path, required=True, help="PNG file to write")
    parser.add_argument("--title", default="reference model training")
    args = parser.parse_args()
    runs = []
    for item in args.runs:
        label, sep, path = item.partition("=")
        if not sep or not Path(path).is_file():
            parser.error(f"{item!r} is not LABEL=PATH of an existing train_log.jsonl")
        runs.append((label, Path(path)))
    plot(runs, args.out, args.title)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
