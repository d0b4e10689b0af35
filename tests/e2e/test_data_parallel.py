"""A launched data-parallel deployment: two reference-engine workers behind the real sglang_router
(the package whose parser checks the dsv4-flash-dp argv), started, swept through and stopped by the
harness, as `dsv4-flash-dp` runs SGLang workers on GPUs."""

from __future__ import annotations

from launchers.ports import busy_ports
from recall_eval.store import load_run
from tests.e2e.cli import run_cli
from tests.e2e.served_process import free_port


def test_sweep_through_router_over_two_reference_workers(tmp_path):
    router, first, second = free_port(), free_port(), free_port()
    profiles = tmp_path / "profiles.toml"
    profiles.write_text(
        f"""
[profiles.reference-dp]
description = "two reference workers behind sglang_router"
engine = "reference"
port = {router}
ready_timeout_s = 180.0

[[profiles.reference-dp.pd]]
role = "worker"
port = {first}

[[profiles.reference-dp.pd]]
role = "worker"
port = {second}

[[profiles.reference-dp.pd]]
role = "router"
port = {router}
"""
    )
    out = tmp_path / "runs"
    completed = run_cli(
        "sweep", "--profile", "reference-dp", "--profiles-file", str(profiles), "--lengths", "400,800",
        "--depths", "0,100", "--trials", "2", "--concurrency", "2", "--out", str(out),
    )  # fmt: skip
    assert completed.returncode == 0, completed.stderr
    (run_dir,) = out.iterdir()
    run, results = load_run(run_dir)
    assert run.status == "finished" and len(results) == 8
    assert all(r.outcome in ("pass", "miss", "empty", "truncated") for r in results), [
        r.error for r in results
    ]
    assert all(
        r.endpoint == f"http://127.0.0.1:{router}" for r in results
    )  # everything went through the router
    logs = {path.name for path in run_dir.glob("server-*.log")}
    assert logs == {"server-worker-1.log", "server-worker-2.log", "server-router.log"}
    assert "--worker-urls" in (run_dir / "server-router.log").read_text(errors="replace")
    for worker in ("server-worker-1.log", "server-worker-2.log"):  # the router spread the requests
        assert "POST /v1/chat/completions" in (run_dir / worker).read_text(errors="replace"), worker
    # the router does not pass /v1/tokenize on: lengths were counted by usage, exactly, through it
    assert run.length_measure == "server:usage.prompt_tokens" and not run.estimated_length_suites
    assert all(not r.length_off_target for r in results)
    assert not busy_ports("127.0.0.1", [router, first, second])  # all three stopped
