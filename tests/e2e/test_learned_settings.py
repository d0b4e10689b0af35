"""A `--base-url` run states only what it learned: against a server without /server_info the report and
the export say `unknown` for the index-key precision and index_topk (never the profile default fp8, nor
port 30000); against an SGLang-shaped /server_info the run learns bf16 and index_topk 1024 through the
allow-list, and never stores the api_key the answer carries."""

from __future__ import annotations

import io
import sys
from pathlib import Path

import pandas as pd
import pytest

from recall_eval.store import load_run
from tests.e2e.cli import run_cli
from tests.e2e.self_describing_server import SECRET
from tests.e2e.served_process import free_port, start_served
from tests.reports.dom import parse

SERVER = Path(__file__).with_name("self_describing_server.py")


def sweep_against(mode: str, tmp_path: Path) -> tuple[Path, str]:
    port = free_port()
    server = start_served([sys.executable, str(SERVER), str(port), mode], tmp_path / f"{mode}.log", port)
    try:
        out = tmp_path / mode
        completed = run_cli(
            "sweep", "--base-url", server.base_url, "--lengths", "200", "--depths", "0,100", "--trials", "1",
            "--out", str(out),
        )  # fmt: skip
    finally:
        server.stop()
    assert completed.returncode == 0, completed.stderr
    (run_dir,) = out.iterdir()
    return run_dir, server.base_url


def profile_table(run_dir: Path) -> tuple[dict[str, str], str]:
    dom = parse((run_dir / "report.html").read_text(encoding="utf-8"))
    rows = {}
    for tr in dom.by_id("profile-table").find_all("tr"):
        cells = tr.find_all("th") + tr.find_all("td")
        if len(cells) == 2:
            rows[cells[0].text.strip()] = cells[1].text.strip()
    header = " ".join(dom.find_all("header")[0].text.split())
    return rows, header


def export_rows(run_dir: Path) -> pd.DataFrame:
    completed = run_cli("export", str(run_dir), "--format", "csv")
    assert completed.returncode == 0, completed.stderr
    return pd.read_csv(io.StringIO(completed.stdout), keep_default_na=False)


def test_base_url_run_says_unknown_for_what_it_did_not_learn(tmp_path):
    run_dir, base_url = sweep_against("bare", tmp_path)
    rows, header = profile_table(run_dir)
    assert rows["index_k_dtype"] == "unknown" and rows["index_topk"] == "unknown"
    assert rows["port"] == base_url.rsplit(":", 1)[1]  # learned from the URL the user gave
    assert "30000" not in rows.values() and "fp8" not in rows.values()
    assert "index K unknown" in header and "index_topk unknown" in header
    frame = export_rows(run_dir)
    assert set(frame["index_k_dtype"]) == {"unknown"} and set(frame["index_k_dtype_source"]) == {"unknown"}
    assert set(frame["index_topk"]) == {""} and set(frame["index_topk_source"]) == {"unknown"}
    # answers written with U+2011 hyphens after a sentence pass both verdicts
    assert set(frame["outcome"]) == {"pass"} and set(frame["strict_outcome"]) == {"pass"}


@pytest.mark.parametrize("mode", ["sglang"])
def test_sglang_server_info_teaches_precision_and_topk(tmp_path, mode, monkeypatch):
    run_dir, _ = sweep_against(mode, tmp_path)
    run, _ = load_run(run_dir)
    rows, header = profile_table(run_dir)
    assert rows["index_k_dtype"] == "bf16" and rows["index_topk"] == "1024"
    assert "index K bf16" in header and "index_topk 1024" in header
    frame = export_rows(run_dir)
    assert set(frame["index_k_dtype"]) == {"bf16"} and set(frame["index_k_dtype_source"]) == {"server"}
    assert set(frame["index_topk"]) == {1024} and set(frame["index_topk_source"]) == {"server"}
    stored = (run_dir / "run.json").read_text(encoding="utf-8")
    assert SECRET not in stored and "launch_command" not in stored and "internal_states" not in stored
    assert run.server_info["json_model_override_args"] == '{"index_topk": 1024}'
    monkeypatch.setenv("RECALL_EVAL_HOME", str(run_dir.parent))
    runs = run_cli("runs", "--json")
    assert '"index_k_dtype": "bf16"' in runs.stdout and '"index_topk": 1024' in runs.stdout
