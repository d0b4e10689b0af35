"""`recall-eval profiles`, `plan` (in process) and `serve`, errors (the real CLI in a subprocess)."""

from __future__ import annotations

import signal
import time

import psutil
import pytest
from typer.testing import CliRunner

import recall_eval.cli.plan
import recall_eval.cli.profiles  # noqa: F401 - registers the command
from launchers.ports import free_port
from launchers.processes import group_members
from recall_eval.cli.app import app
from tests.e2e.cli import run_cli, start_cli


def invoke(args: list[str], cwd, monkeypatch):  # noqa: ANN001, ANN201
    monkeypatch.chdir(cwd)
    monkeypatch.setenv("COLUMNS", "200")
    return CliRunner().invoke(app, args, catch_exceptions=False)


def test_profiles_lists_resolved_commands(tmp_path, monkeypatch):
    done = invoke(["profiles"], tmp_path, monkeypatch)
    assert done.exit_code == 0, done.output
    for name in ("reference", "dsv4-flash", "dsv4-flash-pd", "dsv32"):
        assert f"{name} (" in done.stdout
    assert "-m sglang.launch_server --model-path deepseek-ai/DeepSeek-V4-Flash" in done.stdout
    assert "--disaggregation-mode prefill" in done.stdout and "sglang_router.launch_router" in done.stdout
    assert "--json-model-override-args '{\"index_topk\": 2048}'" in done.stdout
    # each kind says what it launches: vLLM's index keys are fp8 only, its index_topk an --hf-overrides
    assert "dsv32-vllm (vllm)" in done.stdout and "vllm serve deepseek-ai/DeepSeek-V3.2" in done.stdout
    assert (
        'index keys: fp8; index_topk via --hf-overrides {"index_topk": N}; lengths from server:/tokenize'
        in done.stdout
    )


def test_profiles_shows_a_users_profile_and_its_launch_error(tmp_path, monkeypatch):
    (tmp_path / "recall-eval.toml").write_text(
        '[profiles.bf16-ref]\nbase = "reference"\nindex_k_dtype = "bf16"\n'
        '[profiles.broken]\nbase = "reference"\ntp = 2\n'
    )
    done = invoke(["profiles"], tmp_path, monkeypatch)
    assert done.exit_code == 0, done.output
    assert "--index-k-dtype bf16" in done.stdout
    assert "cannot launch:" in done.stdout and "tp must be 1" in done.stdout


def test_unknown_profile_is_one_line_exit_2(tmp_path):
    done = run_cli("serve", "nope", home=tmp_path, cwd=tmp_path)
    assert done.returncode == 2
    assert "unknown profile 'nope'; known profiles:" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


def test_plan_prints_the_precision_comparison_table(tmp_path, monkeypatch):
    done = invoke(["plan", "dsv4-flash", "--context-length", "524288"], tmp_path, monkeypatch)
    assert done.exit_code == 0, done.output
    out = done.stdout
    assert "index-key precision: KV cost and capacity" in out
    for row_start in ("│ fp8 ", "│ fp4 ", "│ bf16 "):
        assert row_start in out
    assert "+651" in out and "sequences of 524,288 tokens" in out
    assert "the often-quoted '~2.5 KB/token more'" in out and "seed" not in out


def test_plan_sizes_the_rings_for_a_users_max_running_requests(tmp_path, monkeypatch):
    (tmp_path / "recall-eval.toml").write_text(
        '[profiles.flash-64]\nbase = "dsv4-flash"\nextra_args = ["--max-running-requests", "64"]\n'
    )
    ours = invoke(["plan", "flash-64"], tmp_path, monkeypatch)
    shipped = invoke(["plan", "dsv4-flash"], tmp_path, monkeypatch)
    assert ours.exit_code == 0 and shipped.exit_code == 0, ours.output + shipped.output
    assert "0.65 GiB of the pool go to the HCA layers' compress-state rings (64 request slots" in ours.stdout
    assert "2.53 GiB" in shipped.stdout and "(256 request slots, SGLang's default" in shipped.stdout


@pytest.mark.slow
def test_serve_reference_prints_ready_time_and_leaves_nothing_after_ctrl_c(tmp_path):
    port = free_port()
    proc = start_cli(
        "serve",
        "reference",
        "--port",
        str(port),
        "--log-dir",
        str(tmp_path / "logs"),
        home=tmp_path,
        cwd=tmp_path,
    )
    lines: list[str] = []
    try:
        assert proc.stdout is not None
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line:
                break
            lines.append(line)
            if line.startswith("endpoint "):
                break
        output = "".join(lines)
        assert any(line.startswith("ready in ") and line.strip().endswith(" s") for line in lines), output
        assert f"endpoint http://127.0.0.1:{port}" in output
        servers = psutil.Process(proc.pid).children(recursive=True)
        assert servers, "no server process under `recall-eval serve`"
        groups = {psutil.Process(server.pid).pid for server in servers if server.ppid() == proc.pid}
        pids = [server.pid for server in servers]
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    rest = proc.stdout.read() if proc.stdout else ""
    assert proc.returncode == 0, rest
    assert "stopped" in rest
    alive = [
        pid for pid in pids if psutil.pid_exists(pid) and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    ]
    assert alive == []
    assert all(group_members(pgid) == [] for pgid in groups)
    assert (tmp_path / "logs" / "server-main.log").read_text().count("The server is fired up") == 1
