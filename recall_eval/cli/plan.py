"""`recall-eval plan PROFILE`: index-key bytes and KV pool capacity at fp8 / fp4 / bf16 (rich table)."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table
from rich.text import Text

from recall_eval.api import servers
from recall_eval.api.options import TargetOptions
from recall_eval.cli.app import app
from recall_eval.cli.options import only, takes_options


def _signed(value: float, unit: str = "") -> str:
    return "-" if abs(value) < 1e-12 else f"{value:+,.0f}{unit}"


@app.command()
@takes_options
def plan(
    profile: Annotated[
        str,
        typer.Argument(
            metavar="PROFILE", help="Profile whose model to plan for (see `recall-eval profiles`)."
        ),
    ],
    target: Annotated[
        TargetOptions, only("context_length", "mem_fraction_static", "tp", "model_path", "profiles_file")
    ],
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
) -> None:
    """Index-key bytes per token (per layer and in total), KV pool, max tokens and sequences that fit,
    for fp8 / fp4 / bf16 index keys, and what switching precision changes. DeepSeek-V4's fixed
    compress-state rings are sized for the profile's --max-running-requests (in its extra_args),
    else for SGLang's default of 256."""
    result = servers.plan(profile, target, gpu_mem_gib=gpu_mem_gb, weights_gib=weights_gb)
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
