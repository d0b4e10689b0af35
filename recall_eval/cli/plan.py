"""`recall-eval plan PROFILE`: index-key bytes and KV pool capacity at fp8 / fp4 / bf16 (rich table)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table
from rich.text import Text

from recall_eval.cli.app import app


def _signed(value: float, unit: str = "") -> str:
    return "-" if abs(value) < 1e-12 else f"{value:+,.0f}{unit}"


@app.command()
def plan(
    profile: Annotated[
        str,
        typer.Argument(
            metavar="PROFILE", help="Profile whose model to plan for (see `recall-eval profiles`)."
        ),
    ],
    context_length: Annotated[
        int | None, typer.Option("--context-length", help="Sequence length to fit. (default: the profile's)")
    ] = None,
    gpu_mem_gb: Annotated[
        float | None,
        typer.Option(
            "--gpu-mem-gb", help="Memory per GPU in GiB, as torch reports it. (default: 139.8, an H200)"
        ),
    ] = None,
    weights_gb: Annotated[
        float | None,
        typer.Option(
            "--weights-gb",
            help="Model weights in GiB. (default: the local model's safetensors or the shipped estimate)",
        ),
    ] = None,
    mem_fraction: Annotated[
        float | None, typer.Option("--mem-fraction", help="Override: mem_fraction_static.")
    ] = None,
    tp: Annotated[int | None, typer.Option(help="Override: tensor parallel size.")] = None,
    model_path: Annotated[
        str | None, typer.Option("--model-path", help="Override: a model dir with config.json.")
    ] = None,
    profiles_file: Annotated[
        Path | None, typer.Option("--profiles-file", help="TOML file with more profiles.")
    ] = None,
) -> None:
    """Index-key bytes per token (per layer and in total), KV pool, max tokens and sequences that fit,
    for fp8 / fp4 / bf16 index keys, and what switching precision changes."""
    from launchers.planner import make_plan
    from launchers.profiles import resolve_profile

    overrides = {"mem_fraction_static": mem_fraction, "tp": tp, "model_path": model_path}
    resolved = resolve_profile(profile, overrides, profiles_file)
    result = make_plan(
        resolved, context_length=context_length, gpu_mem_gib=gpu_mem_gb, weights_gib=weights_gb
    )
    out = Console(highlight=False)
    if not out.is_terminal:  # piped: keep the table whole
        out = Console(width=200, highlight=False)
    weights = f"{result.weights_gib:.0f} GiB" if result.weights_gib is not None else "unknown"
    out.print(Text.assemble((result.model, "bold"), f"  (config: {result.config_source})"))
    out.print(
        f"KV pool per GPU = {result.mem_fraction:.2f} x {result.gpu_mem_gib:.1f} GiB - weights {weights} / tp {result.tp} "
        f"= {result.pool_gib:.1f} GiB; sequences of {result.context_length:,} tokens"
    )
    table = Table(title="index-key precision: KV cost and capacity")
    columns = [
        ("index K", "left"),
        ("B/key", "right"),
        ("B/token/layer", "right"),
        ("index B/token", "right"),
        ("KV B/token", "right"),
        ("max tokens", "right"),
        ("sequences", "right"),
        ("vs fp8 B/token", "right"),
        ("vs fp8 GiB/seq", "right"),
        ("vs fp8 slots", "right"),
    ]
    for header, justify in columns:
        table.add_column(header, justify=justify)  # type: ignore[arg-type]
    for row in result.rows:
        name = row.dtype if row.available else f"{row.dtype} (n/a)"
        table.add_row(
            name,
            f"{row.key_bytes}",
            f"{row.index_bytes_per_token_layer:g}",
            f"{row.index_bytes_per_token:,.0f}",
            f"{row.kv_bytes_per_token:,.0f}",
            f"{row.max_tokens:,}",
            f"{row.sequences:,}",
            _signed(row.delta_bytes_per_token),
            "-" if row.delta_gib_at_context == 0 else f"{row.delta_gib_at_context:+.2f}",
            "-" if row.slots_change == 0 else f"{row.slots_change:+.1%}",
        )
    out.print(table)
    for note in result.notes:
        out.print(f"- {note}", markup=False)
