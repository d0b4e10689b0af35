"""results_frame / runs_frame / export on run directories written with the real store, and `recall-eval export`."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

import pandas as pd
import pytest

from recall_eval.compare_store import CompareManifest, CompareVariant, relative_run_dir
from recall_eval.errors import UserError
from recall_eval.frame import RESULT_COLUMNS, RUN_COLUMNS, export_frame, results_frame, runs_frame
from recall_eval.store import RESULTS_FILE
from recall_eval.types import Completion, Profile
from reports.compare_report import write_compare
from tests.e2e.cli import run_cli
from tests.reports.compare_builders import paired_results, result, run_of, store_run
from tests.reports.sample_run import build_sample_run

README = Path(__file__).resolve().parents[2] / "README.md"


@pytest.fixture(scope="module")
def sample(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_sample_run(tmp_path_factory.mktemp("runs"))


def test_one_row_per_stored_case_with_the_documented_columns(sample: Path) -> None:
    frame = results_frame(sample)
    raw = [json.loads(line) for line in (sample / RESULTS_FILE).read_text().splitlines()]
    assert len(frame) == len(raw) == 40
    assert list(frame.columns[: len(RESULT_COLUMNS)]) == list(RESULT_COLUMNS)
    assert set(frame["run_id"]) == {"20250101-000000-abcdef"}
    assert set(frame["profile"]) == {"reference-cpu"} and set(frame["index_topk"]) == {512}
    assert (frame["counted"] == frame["outcome"].isin(["pass", "miss", "empty", "truncated"])).all()
    by_id = {r["case_id"]: r for r in raw}
    for row in frame.itertuples():
        stored = by_id[row.case_id]
        assert row.outcome == stored["outcome"] and row.target_tokens == stored["target_tokens"]
        completion = stored["completion"]
        if completion is None or not row.counted:
            assert pd.isna(row.decode_tps) and pd.isna(row.ttft_s)
            continue
        gaps = completion["itl_s"]
        assert row.decode_gaps == len(gaps)
        if gaps:
            assert row.decode_tps == pytest.approx(len(gaps) / sum(gaps))
        assert row.prefill_tps == pytest.approx(completion["prompt_tokens"] / completion["ttft_s"])


def test_decode_rate_counts_measured_gaps_not_the_end_token() -> None:
    # 10 tokens in usage, the end token streams no text: 9 chunks, 8 gaps of 20 ms -> 50 tok/s, not 56.25
    completion = Completion(text="x", finish_reason="stop", completion_tokens=10, itl_s=(0.02,) * 8)
    assert completion.decode_tokens_per_s == pytest.approx(50.0)
    assert Completion(text="x", completion_tokens=1).decode_tokens_per_s is None


def test_readme_documents_every_column() -> None:
    text = README.read_text(encoding="utf-8")
    section = text[text.index("## Results as data") :]
    documented = re.findall(r"^\| `([a-z_]+)` \| (.*) \|$", section, flags=re.MULTILINE)
    assert documented == list(RESULT_COLUMNS.items()) + list(RUN_COLUMNS.items())


def _compare_dir(root: Path) -> Path:
    a, b = paired_results([("pass", "pass", 1000), ("miss", "pass", 2000), ("pass", "oom", 2000)])
    run_a = store_run(root, run_of("fp8", (1000, 2000), run_id="run-a"), a)
    run_b = store_run(root, run_of("bf16", (1000, 2000), dtype="bf16", run_id="run-b"), b)
    compare_dir = root / "compare-x"
    variants = (
        CompareVariant(label="fp8", run_dir=relative_run_dir(compare_dir, run_a)),
        CompareVariant(label="bf16", run_dir=relative_run_dir(compare_dir, run_b)),
    )
    write_compare(compare_dir, CompareManifest(compare_id="x", created_at=0.0, variants=variants))
    return compare_dir


def test_endpoint_never_carries_credentials(tmp_path: Path) -> None:
    run = run_of("v", (1000,)).model_copy(
        update={
            "profile": Profile(
                name="external", engine="external", base_url="https://u:pw@h.example:8443/v1?key=k"
            )
        }
    )
    frame = results_frame(store_run(tmp_path, run, [result("c1", "pass", 1000)]))
    assert frame["endpoint"].tolist() == ["https://h.example:8443/v1"]


def test_compare_directories_expand_to_their_runs(tmp_path: Path) -> None:
    compare_dir = _compare_dir(tmp_path)
    frame = results_frame(compare_dir)
    assert list(frame["run_id"].drop_duplicates()) == ["run-a", "run-b"]
    assert frame.groupby("run_id")["index_k_dtype"].first().to_dict() == {"run-a": "fp8", "run-b": "bf16"}
    runs = runs_frame(compare_dir)
    assert list(runs.columns) == list(RUN_COLUMNS)
    assert runs[["run_id", "variant", "planned", "stored"]].values.tolist() == [
        ["run-a", "fp8", 4, 3],
        ["run-b", "bf16", 4, 3],
    ]
    with pytest.raises(UserError, match="neither a run directory"):
        results_frame(tmp_path)


def test_a_case_stored_twice_counts_once(tmp_path: Path) -> None:
    run_dir = store_run(
        tmp_path, run_of("v", (1000,)), [result("c1", "miss", 1000), result("c1", "pass", 1000)]
    )
    frame = results_frame(run_dir)
    assert frame["outcome"].tolist() == ["pass"]


@pytest.mark.parametrize("fmt", ["csv", "jsonl", "parquet"])
def test_export_round_trips(sample: Path, fmt: str) -> None:
    frame = results_frame(sample)
    data = export_frame(frame, fmt)  # type: ignore[arg-type]
    assert data is not None
    if fmt == "csv":
        back = pd.read_csv(io.BytesIO(data))
    elif fmt == "jsonl":
        back = pd.read_json(io.BytesIO(data), lines=True)
    else:
        back = pd.read_parquet(io.BytesIO(data))
        assert back.dtypes.to_dict() == frame.dtypes.to_dict()
    assert list(back.columns) == list(frame.columns)
    assert back["case_id"].tolist() == frame["case_id"].tolist()
    assert back["passed"].tolist() == frame["passed"].tolist()
    assert back["decode_tps"].tolist() == pytest.approx(frame["decode_tps"].tolist(), nan_ok=True)


def test_export_command(tmp_path: Path, sample: Path) -> None:
    compare_dir = _compare_dir(tmp_path)
    out = tmp_path / "all.parquet"
    done = run_cli("export", str(sample), str(compare_dir), "--format", "parquet", "--out", str(out))
    assert done.returncode == 0, done.stderr
    table = pd.read_parquet(out)
    assert len(table) == 40 + 6
    assert table["run_id"].drop_duplicates().tolist() == ["20250101-000000-abcdef", "run-a", "run-b"]
    csv = run_cli("export", str(sample))
    assert csv.returncode == 0 and csv.stdout.splitlines()[0].startswith("run_id,variant,profile,")
    assert len(csv.stdout.splitlines()) == 41
    bad = run_cli("export", str(sample), "--format", "xlsx")
    assert bad.returncode == 2 and "pick one of csv, parquet, jsonl" in bad.stderr
    binary = run_cli("export", str(sample), "--format", "parquet")
    assert binary.returncode == 2 and "--out" in binary.stderr


def test_the_library_layer_gives_the_same_frame(tmp_path: Path) -> None:
    from recall_eval import api

    compare_dir = _compare_dir(tmp_path)
    from_dir = results_frame(compare_dir)
    records = [api.load_run(path) for path in runs_frame(compare_dir)["run_dir"]]
    assert api.results_frame(records).equals(from_dir)
    assert api.results_frame(compare_dir).equals(from_dir)
    assert api.runs_frame(records[0])["run_id"].tolist() == ["run-a"]
    assert records[0].recall == from_dir[from_dir.run_id == "run-a"].query("counted")["passed"].mean()
    out = tmp_path / "x.jsonl"
    api.export(records, "jsonl", out)
    assert pd.read_json(out, lines=True)["case_id"].tolist() == from_dir["case_id"].tolist()


def test_readme_export_example_gives_one_row_per_run_and_case(tmp_path: Path) -> None:
    """README's own pairing, `export runs/<run-id> runs/compare-<id>`, where the run is one of the
    compare's, and a run given twice: one row per (run_id, case_id) whatever the arguments."""
    compare_dir = _compare_dir(tmp_path)
    run_a = tmp_path / "run-a"
    readme = re.search(r"^recall-eval export (runs/<run-id> runs/compare-<id>) ", README.read_text(), re.M)
    assert readme is not None  # the example this test stands for is still in the README
    for args in (
        [str(run_a), str(compare_dir)],
        [str(run_a), str(run_a)],
        [str(compare_dir), str(compare_dir)],
    ):
        done = run_cli("export", *args, "--format", "csv")
        assert done.returncode == 0, done.stderr
        table = pd.read_csv(io.StringIO(done.stdout))
        assert not table.duplicated(["run_id", "case_id"]).any(), args
        assert len(table) == len(results_frame(compare_dir if str(compare_dir) in args else run_a))
    frame = results_frame([run_a, compare_dir, tmp_path / "run-a" / "run.json"])
    assert len(frame) == 6 and not frame.duplicated(["run_id", "case_id"]).any()
