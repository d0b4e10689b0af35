"""`study --ray` on the loopback cluster (tests/ray/conftest.py): its two cells' servers run at the same
time (their lifetimes, from placements.json, overlap), study.json says so, and the study's results equal,
cell by cell and case by case, those of the same study without Ray, with the same exit code.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.e2e.cli import run_cli
from tests.ray.conftest import LoopbackCluster
from tests.ray.test_ray_compare import CASES, GRID, outcomes

pytestmark = [pytest.mark.ray, pytest.mark.slow]

AXES = ["--axis", "dtype=fp8,bf16", "--baseline", "dtype=bf16"]


def study(home: Path, *extra: str) -> tuple[subprocess.CompletedProcess[str], dict, list[Path]]:
    done = run_cli("study", *AXES, *GRID, *extra, home=home, timeout=420)
    assert done.returncode in (0, 4), done.stderr[-3000:]
    html = Path(done.stdout.strip().splitlines()[-1])
    manifest = json.loads((html.parent / "study.json").read_text())
    assert [c["status"] for c in manifest["cells"]] == ["finished", "finished"]
    return done, manifest, [(html.parent / c["run_dir"]).resolve() for c in manifest["cells"]]


def test_study_on_ray_runs_its_cells_at_once_with_the_local_results(
    ray_cluster: LoopbackCluster, tmp_path: Path
) -> None:
    on_ray, ray_study, ray_dirs = study(tmp_path / "ray", "--ray", ray_cluster.address)
    local, local_study, local_dirs = study(tmp_path / "local")

    spans = []
    for run_dir in ray_dirs:
        (server,) = json.loads((run_dir / "placements.json").read_text())["servers"]
        spans.append((server["ready_at"], server["stopped_at"]))
    (a_ready, a_stop), (b_ready, b_stop) = spans
    assert a_ready < b_stop and b_ready < a_stop  # each became ready before the other stopped
    assert "Ray cluster" in ray_study["measurement"] and "sequential" in local_study["measurement"]
    assert not any((d / "placements.json").exists() for d in local_dirs)

    assert on_ray.returncode == local.returncode
    for ray_dir, local_dir in zip(ray_dirs, local_dirs, strict=True):
        assert outcomes(ray_dir) == outcomes(local_dir) and len(outcomes(ray_dir)) == CASES
    counts = ["cell", "answered", "infra", "p_value"]
    assert [{k: row[k] for k in counts} for row in ray_study["numbers"]["cells"]] == [
        {k: row[k] for k in counts} for row in local_study["numbers"]["cells"]
    ]
    assert ray_study["recommendation"]["line"] == local_study["recommendation"]["line"]
