"""Stored formats that evolve without losing runs, through the real command line: run directories
written by the previous format (tests/fixtures/format-1, made by recall-eval itself) read by today's
`runs`, `report`, `sweep --resume` and `compare` reuse; a result line with a field this version does not
know; a whole line that is not a result, kept and reported; a run of a newer format listed with the
reason; a label that looks like rich markup; `report --rescore`."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from recall_eval.store import RunStore
from tests.e2e.cli import run_cli

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "format-1" / "runs"
SWEEP = "sweep-today"
COMPARE_RUNS = ("20261203-180049-d090c1", "20261203-180133-c4c805")

pytestmark = pytest.mark.slow


@pytest.fixture
def home(tmp_path: Path) -> Path:
    """A copy of the format-1 run home (tests change their copy, never the fixture)."""
    copy = tmp_path / "runs"
    shutil.copytree(FIXTURE, copy)
    return copy


def _lines(path: Path) -> list[str]:
    return path.read_text().splitlines()


def _runs_json(home: Path) -> dict:
    listed = run_cli("runs", "--home", str(home), "--json")
    assert listed.returncode == 0, listed.stderr
    return json.loads(listed.stdout)


def test_format_1_run_directories_are_read_by_runs_and_report(home: Path) -> None:
    """Every run and the compare of the previous format are listed with their numbers; report renders
    them; the run reads as format 2 with scoring version 1 (the migration), its file untouched."""
    before = (home / SWEEP / "run.json").read_bytes()
    payload = _runs_json(home)
    assert payload["unreadable_runs"] == []
    by_id = {run["run_id"]: run for run in payload["runs"]}
    assert set(by_id) == {SWEEP, *COMPARE_RUNS}
    sweep = by_id[SWEEP]
    assert (sweep["status"], sweep["cases_done"], sweep["cases_total"]) == ("finished", 4, 4)
    assert (sweep["passes"], sweep["answered"], sweep["recall"]) == (1, 4, 0.25)
    assert sweep["unreadable_lines"] == []
    [compare] = payload["compares"]
    assert [v["label"] for v in compare["variants"]] == ["fp8", "bf16"]
    report = run_cli("report", str(home / SWEEP))
    assert report.returncode == 0, report.stderr
    assert (home / SWEEP / "report.html").is_file() and "1 passed of 4 answered" in report.stderr
    assert 'id="unreadable"' not in (home / SWEEP / "report.html").read_text()
    rendered = run_cli("report", str(home / compare["compare_id"]))
    assert rendered.returncode == 0, rendered.stderr
    run = RunStore.open(home / SWEEP).run
    assert run.format_version == 2 and run.versions["scoring"] == "1"
    assert (home / SWEEP / "run.json").read_bytes() == before  # reading migrates in memory only


def test_compare_reuses_format_1_runs_that_differ_only_in_pacing(home: Path) -> None:
    """The compare of the previous format, asked again with another concurrency, timeout and retries
    (none changes a verdict): both variants reuse their stored runs, no server is launched."""
    compared = run_cli(
        "compare", "fp8", "bf16", "--lengths", "400", "--depths", "50", "--trials", "1", "--max-tokens", "16",
        "--concurrency", "4", "--request-timeout", "60", "--retries", "1", home=home,
    )  # fmt: skip
    assert compared.returncode == 0, compared.stderr
    reused = [line for line in compared.stderr.splitlines() if "reusing run" in line]
    assert len(reused) == 2, compared.stderr
    assert all(any(run_id in line for line in reused) for run_id in COMPARE_RUNS)
    assert "starting main" not in compared.stderr
    assert sorted(p.name for p in home.iterdir() if not p.name.startswith("compare-")) == sorted(
        [SWEEP, *COMPARE_RUNS]
    )  # no new run


def test_a_format_1_run_is_resumed(home: Path) -> None:
    """An interrupted run of the previous format finishes under today's code: its stored lines stay as
    they were, the missing case runs on the launched reference engine, run.json becomes format 2."""
    run_dir = home / SWEEP
    (run_dir / "servers.json").unlink()  # its pids are the fixture machine's; not this test's subject
    kept = _lines(run_dir / "results.jsonl")[:3]
    (run_dir / "results.jsonl").write_text("".join(line + "\n" for line in kept))
    data = json.loads((run_dir / "run.json").read_text())
    data["status"] = "interrupted"
    (run_dir / "run.json").write_text(json.dumps(data, indent=2))
    resumed = run_cli("sweep", "--resume", str(run_dir), home=home)
    assert resumed.returncode in (0, 1), resumed.stderr  # 1: recall under a threshold is not asked here
    lines = _lines(run_dir / "results.jsonl")
    assert lines[:3] == kept and len(lines) == 4
    stored = json.loads((run_dir / "run.json").read_text())
    assert (stored["status"], stored["format_version"], stored["versions"]["scoring"]) == ("finished", 2, "1")
    assert json.loads(lines[3])["max_tokens"] == 16 and json.loads(lines[3])["attempt"] == 1


def test_unknown_fields_and_unreadable_lines_are_read_kept_and_reported(home: Path) -> None:
    """A line with a field from a newer recall-eval is read by runs and report (and kept when report
    --rescore rewrites the file); a whole last line that is not a result is kept, not counted, and
    reported by both, also after the file is rewritten."""
    results = home / SWEEP / "results.jsonl"
    lines = _lines(results)
    first = json.loads(lines[0])
    first["judge_model"] = "from-the-future"
    lines[0] = json.dumps(first)
    results.write_text("".join(line + "\n" for line in lines) + '{"case_id": "x", "outcome": 7}\n')
    payload = _runs_json(home)
    sweep = next(run for run in payload["runs"] if run["run_id"] == SWEEP)
    assert (sweep["cases_done"], sweep["passes"], sweep["answered"]) == (4, 1, 4)
    assert [item["line"] for item in sweep["unreadable_lines"]] == [5]
    table = run_cli("runs", "--home", str(home))
    assert table.returncode == 0, table.stderr
    assert f"run {SWEEP}: results.jsonl line 5 cannot be read (suite: Field required and" in table.stdout
    report = run_cli("report", str(home / SWEEP))
    assert report.returncode == 0, report.stderr
    assert (
        "results.jsonl line 5 cannot be read" in report.stderr and "1 passed of 4 answered" in report.stderr
    )
    rescored = run_cli("report", "--rescore", str(home / SWEEP))
    assert rescored.returncode == 0, rescored.stderr
    assert "re-scored 4 answers" in rescored.stderr and "0 verdicts changed" in rescored.stderr
    after = _lines(results)
    assert json.loads(after[0])["judge_model"] == "from-the-future"
    assert after[4] == '{"case_id": "x", "outcome": 7}' and len(after) == 5


def test_rescore_says_how_many_verdicts_changed(home: Path) -> None:
    """A run scored under other rules (here: a pass stored as a miss, scoring version 0) is not reused;
    report --rescore judges its answers again, says 1 verdict changed, keeps the old file beside, and
    records today's scoring version."""
    run_dir = home / SWEEP
    lines = _lines(run_dir / "results.jsonl")
    index = next(i for i, line in enumerate(lines) if json.loads(line)["outcome"] == "pass")
    changed = json.loads(lines[index])
    changed.update(outcome="miss", strict_outcome="miss")
    lines[index] = json.dumps(changed)
    (run_dir / "results.jsonl").write_text("".join(line + "\n" for line in lines))
    data = json.loads((run_dir / "run.json").read_text())
    data["format_version"], data["versions"]["scoring"] = 2, "0"
    (run_dir / "run.json").write_text(json.dumps(data, indent=2))
    rescored = run_cli("report", "--rescore", str(run_dir))
    assert rescored.returncode == 0, rescored.stderr
    assert "with scoring version 1 (was 0): 1 verdict changed" in rescored.stderr
    assert "1 passed of 4 answered" in rescored.stderr
    assert json.loads(_lines(run_dir / "results.jsonl")[index])["outcome"] == "pass"
    assert _lines(run_dir / "results.jsonl.scoring-0")[index] == lines[index]
    assert json.loads((run_dir / "run.json").read_text())["versions"]["scoring"] == "1"


def test_runs_lists_a_run_it_cannot_read_with_the_reason(home: Path) -> None:
    """A run of a newer format is listed, naming the recall-eval that wrote it; a label that reads as
    rich markup (`cand[/x]`) is shown as written, not parsed."""
    future = home / "from-the-future"
    shutil.copytree(home / SWEEP, future)
    data = json.loads((future / "run.json").read_text())
    data["format_version"], data["versions"]["recall-eval"] = 99, "9.0.0"
    (future / "run.json").write_text(json.dumps(data))
    odd = json.loads((home / SWEEP / "run.json").read_text())
    odd["spec"]["variant"] = "cand[/x]"
    (home / SWEEP / "run.json").write_text(json.dumps(odd))
    table = run_cli("runs", "--home", str(home))
    assert table.returncode == 0, table.stderr
    assert "cand[/x]" in table.stdout
    line = next(line for line in table.stdout.splitlines() if "from-the-future" in line)
    assert "written by a newer recall-eval 9.0.0" in line and "upgrade recall-eval" in line
    payload = _runs_json(home)
    [unreadable] = payload["unreadable_runs"]
    assert unreadable["path"].endswith("from-the-future") and "9.0.0" in unreadable["reason"]
