"""`recall-eval ray-status`: a Ray cluster's nodes and free resources against what profiles need."""

from __future__ import annotations

import dataclasses
import json
import shlex
from pathlib import Path
from typing import Annotated

import typer

from recall_eval.cli.app import app


@app.command("ray-status")
def ray_status(
    profiles: Annotated[
        list[str] | None,
        typer.Argument(metavar="[PROFILE]...", help="Profiles to check (default: the reference engine's)."),
    ] = None,
    ray: Annotated[
        str, typer.Option("--ray", metavar="ADDRESS", help="The cluster: HOST:PORT of its head, or 'local'.")
    ] = "local",
    ray_node_gpus: Annotated[
        int | None,
        typer.Option("--ray-node-gpus", min=1, help="GPUs of one node. (default: the largest node's count)"),
    ] = None,
    place: Annotated[
        bool,
        typer.Option(
            "--place",
            help="Reserve each multi-node profile's placement for real and show every rank's node and argv (released at once; nothing starts).",
        ),
    ] = False,
    profiles_file: Annotated[
        Path | None, typer.Option("--profiles-file", help="TOML file with more profiles.")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print it as JSON.")] = False,
) -> None:
    """What the Ray cluster offers (nodes, GPUs, CPUs, free now) against what each profile's server
    needs (GPUs, nodes of what size), and where each rank of a multi-node server would run."""
    from recall_eval.api.cluster import ray_status as status_of

    status = status_of(ray, profiles or (), ray_node_gpus, place, profiles_file)
    if as_json:
        print(json.dumps(dataclasses.asdict(status), indent=2))
        return
    print(
        f"{len(status.nodes)} node(s); free now: "
        + ", ".join(f"{k} {v:g}" for k, v in sorted(status.available.items()))
    )
    for node in status.nodes:
        print(f"  node {node.ip} ({node.node_id[:12]}): {node.gpus:g} GPU, {node.cpus:g} CPU")
    for need in status.needs:
        verdict = "fits" if need.fits is None else f"does not fit: {need.fits}"
        print(f"profile {need.profile}: {need.ask.describe()}; {verdict}")
        for rank in need.ranks:
            print(
                f"  rank {rank.rank} on {rank.node_ip} ({rank.node_id[:12]}), GPUs {list(rank.gpu_ids)}: {shlex.join(rank.argv)}"
            )
