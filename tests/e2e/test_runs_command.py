"""`recall-eval runs`: variant, profile, index-K dtype and index_topk per run, compare directories, --json."""

from __future__ import annotations

import json
import time
from pathlib import Path

from launchers.profiles import resolve_profile
from recall_eval.compare_store import COMPARE_FILE, CompareManifest, CompareVariant
from recall_eval.store import RunStore
from recall_eval.types import Profile, Result, Run, RunSpec
from tests.e2e.cli import run_cli

SPEC = RunSpec(lengths=(1000, 2000), depths=(50.0,), trials=1)


def _result(case_id: str, outcome: str) -> Result:
    return Result(
        case_id=case_id, suite="needle", variant="bf16", outcome=outcome, target_tokens=1000,
        depth_percent=50.0, started_at=0.0, finished_at=1.0,
    )  # fmt: skip


def _stores(root: Path) -> tuple[RunStore, RunStore]:
    launched = resolve_profile("reference", {"index_k_dtype": "bf16", "index_topk": 1024})
    bf16 = RunStore.create(
        Run(run_id="r1-bf16", spec=SPEC.model_copy(update={"variant": "bf16"}), profile=launched,
            status="finished", created_at=time.time()),
        root,
    )  # fmt: skip
    bf16.append_result(_result("a", "pass"))
    bf16.append_result(_result("b", "miss"))
    external = Profile(name="external", engine="external", base_url="http://10.0.0.7:30000")
    remote = RunStore.create(
        Run(run_id="r2-remote", spec=SPEC, profile=external, created_at=time.time() + 1), root
    )
    manifest = CompareManifest(
        compare_id="compare-bf16-vs-remote-12345678",
        created_at=time.time() + 2,
        command="recall-eval compare bf16 remote",
        variants=(CompareVariant(label="bf16", run_dir="../r1-bf16"), CompareVariant(label="remote", run_dir="../r2-remote")),
    )  # fmt: skip
    compare_dir = root / manifest.compare_id
    compare_dir.mkdir()
    (compare_dir / COMPARE_FILE).write_text(manifest.model_dump_json())
    return bf16, remote


def test_runs_table_shows_target_settings_and_compares(tmp_path: Path) -> None:
    _stores(tmp_path)
    listed = run_cli("runs", "--home", str(tmp_path))
    assert listed.returncode == 0, listed.stderr
    lines = listed.stdout.splitlines()
    bf16 = next(line for line in lines if "r1-bf16" in line)
    for cell in ("finished", "bf16", "reference", "1024", "2/2", "50.0% (1/2)"):
        assert cell in bf16, bf16
    remote = next(line for line in lines if "r2-remote" in line)
    assert "http://10.0.0.7:30000" in remote and "running" in remote and "0/2" in remote
    assert "fp8" not in remote  # a running server's precision is not known: not shown as the default
    assert any("compares in" in line for line in lines)
    compare = next(line for line in lines if "compare-bf16-vs-remote" in line)
    assert "bf16, remote" in compare and "r1-bf16, r2-remote" in compare


def test_runs_json_for_scripts(tmp_path: Path) -> None:
    _stores(tmp_path)
    listed = run_cli("runs", "--home", str(tmp_path), "--json")
    assert listed.returncode == 0, listed.stderr
    payload = json.loads(listed.stdout)
    first, second = payload["runs"]
    assert (first["run_id"], first["variant"], first["profile"]) == ("r1-bf16", "bf16", "reference")
    assert (first["index_k_dtype"], first["index_topk"], first["recall"]) == ("bf16", 1024, 0.5)
    assert (first["cases_done"], first["cases_total"], first["passes"], first["answered"]) == (2, 2, 1, 2)
    assert (second["engine"], second["base_url"], second["index_k_dtype"]) == (
        "external",
        "http://10.0.0.7:30000",
        None,
    )
    [compare] = payload["compares"]
    assert [v["label"] for v in compare["variants"]] == ["bf16", "remote"]
    assert compare["variants"][0]["run_dir"] == str(tmp_path / "r1-bf16")
    empty = run_cli("runs", "--home", str(tmp_path / "none"), "--json")
    assert json.loads(empty.stdout)["runs"] == [] and json.loads(empty.stdout)["compares"] == []


def test_runs_lists_an_unreadable_compare_with_its_reason(tmp_path: Path) -> None:
    """A torn compare.json and one of a newer format are listed by `runs` (table and --json) with the
    reason, not skipped in silence; the readable compare is still listed."""
    _stores(tmp_path)
    torn, newer = tmp_path / "compare-torn-1", tmp_path / "compare-newer-2"
    torn.mkdir()
    (torn / COMPARE_FILE).write_text('{"compare_id": "compare-torn-1", "variants": [')
    newer.mkdir()
    (newer / COMPARE_FILE).write_text('{"format_version": 7, "compare_id": "compare-newer-2"}')
    listed = run_cli("runs", "--home", str(tmp_path))
    assert listed.returncode == 0, listed.stderr
    text = " ".join(listed.stdout.split())
    assert "compare-bf16-vs-remote-12345678" in text
    assert (
        f"unreadable compare: compare-torn-1: {torn / COMPARE_FILE} is not a valid compare file (not JSON"
        in text
    )
    assert "unreadable compare: compare-newer-2:" in text and "upgrade recall-eval" in text
    payload = json.loads(run_cli("runs", "--home", str(tmp_path), "--json").stdout)
    reasons = {Path(item["path"]).name: item["reason"] for item in payload["unreadable_compares"]}
    assert set(reasons) == {"compare-torn-1", "compare-newer-2"}
    assert (
        "compare file format 7 is newer than this recall-eval reads (1 and older)"
        in reasons["compare-newer-2"]
    )
    assert [item["compare_id"] for item in payload["compares"]] == ["compare-bf16-vs-remote-12345678"]
