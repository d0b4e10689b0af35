"""Secrets are used, never written: a key planted in every place a user can put one (profile env,
PD env, extra_args, argv, the server's /server_info and launch command, request headers) reaches no
file under the run directory and no line on the console; and the key is really used."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

from recall_eval.redact import MASK
from recall_eval.store import RunStore, load_run
from recall_eval.types import PDPart, Profile, Run, RunSpec
from tests.e2e.cli import cli_argv, cli_env, error_lines, run_cli
from tests.e2e.reference_server import ReferenceServer

API_KEY = "sk-planted-apikey-5d1e"
ENV_TOKEN = "hf_planted_envtoken_77aa"
ENV_PASSWORD = "planted-password-0c9f"
PD_SECRET = "planted-pd-secret-41b2"
HEADER_SECRET = "planted-header-secret-9e3d"
SECRETS = (API_KEY, ENV_TOKEN, ENV_PASSWORD, PD_SECRET, HEADER_SECRET)


def leaks(root: Path, text: str = "") -> list[str]:
    """Every (file, secret) pair where a planted secret appears, plus the console text."""
    found = []
    for path in [p for p in root.rglob("*") if p.is_file()]:
        data = path.read_bytes()
        found += [f"{path.name}: {s}" for s in SECRETS if s.encode() in data]
    found += [f"console: {s}" for s in SECRETS if s in text]
    return found


def test_launched_profile_with_secrets_writes_none_of_them(tmp_path):
    profiles = tmp_path / "profiles.toml"
    profiles.write_text(
        f"""
[profiles.secretive]
description = "reference engine started with --api-key and secret-looking env"
engine = "reference"
port = 0
ready_timeout_s = 120.0
extra_args = ["--api-key", "{API_KEY}"]
env = {{ HF_TOKEN = "{ENV_TOKEN}", DB_PASSWORD = "{ENV_PASSWORD}" }}
"""
    )
    out = tmp_path / "runs"
    completed = run_cli(
        "sweep", "--profile", "secretive", "--profiles-file", str(profiles), "--lengths", "400",
        "--depths", "50", "--trials", "2", "--out", str(out),
    )  # fmt: skip
    console = completed.stdout + completed.stderr
    (run_dir,) = out.iterdir()
    run, results = load_run(run_dir)
    assert run.status == "finished", (run.note, console)
    # the harness used the key the profile gave its server: every case got a live answer
    assert {r.outcome for r in results} <= {"pass", "miss", "empty", "truncated"}, [r.error for r in results]
    assert run.profile is not None and run.profile.extra_args == ("--api-key", MASK)
    assert run.profile.env["HF_TOKEN"] == MASK and run.profile.env["DB_PASSWORD"] == MASK
    assert "launch_command" not in str(run.server_info) and "api_key" not in str(run.server_info)
    assert run.server_info["server_info"]["index_topk"]  # the allow-listed fields are still there
    logs = list(run_dir.glob("server-*.log"))
    assert logs, "the launched server's log is in the run directory"
    # the engine prints its arguments, key included, as SGLang does: the log the run writes masks it
    assert f"api_key='{MASK}'" in logs[0].read_text()
    assert (run_dir / "report.html").is_file()
    assert leaks(run_dir, console) == []


def test_pd_env_and_headers_masked_in_run_json(tmp_path):
    profile = Profile(
        name="pd",
        engine="sglang",
        extra_args=("--admin-api-key=" + API_KEY,),
        pd=(
            PDPart(role="prefill", port=1, env={"MOONCAKE_SECRET": PD_SECRET}),
            PDPart(role="router", port=2, extra_args=("--api-key", API_KEY)),
        ),
    )
    spec = RunSpec(lengths=(1000,), depths=(50.0,), extra_body={"user_token": HEADER_SECRET})
    store = RunStore.create(Run(run_id="r1", spec=spec, profile=profile, created_at=time.time()), tmp_path)
    server_info = {
        "server_info": {"api_key": API_KEY, "launch_command": f"x --api-key {API_KEY}", "tp_size": 4}
    }
    store.write_run(
        store.run.model_copy(update={"server_info": server_info, "note": f"Bearer {HEADER_SECRET}"})
    )
    assert leaks(tmp_path) == []
    assert store.run.server_info == {"server_info": {"tp_size": 4}}


def test_missing_key_is_one_line_naming_the_fix(tmp_path):
    server = ReferenceServer(tmp_path / "server.log", "--api-key", API_KEY)
    try:
        completed = run_cli("sweep", "--base-url", server.base_url, "--lengths", "400", "--depths", "50")
    finally:
        server.stop()
    lines = error_lines(completed)
    assert completed.returncode != 0
    assert len(lines) == 1 and "HTTP 401" in lines[0] and "--api-key" in lines[0], lines
    assert "RECALL_EVAL_API_KEY" in lines[0]


def test_key_and_headers_given_on_the_command_line_are_used_never_written(tmp_path, monkeypatch):
    """--api-key and --header against a server that demands the key: sweep, resume and compare use
    them; no file under the runs directory, compare.json's command line included, holds either."""
    server = ReferenceServer(tmp_path / "server.log", "--api-key", API_KEY)
    home = tmp_path / "home"
    auth = ["--api-key", API_KEY, "--header", f"X-Secret-Token: {HEADER_SECRET}"]
    grid = ["--lengths", "400", "--depths", "50", "--trials", "1"]
    monkeypatch.setenv("RECALL_EVAL_HOME", str(home))
    try:
        swept = run_cli("sweep", "--base-url", server.base_url, *grid, *auth)
        assert swept.returncode == 0, swept.stderr
        (run_dir,) = [p for p in home.iterdir() if p.is_dir()]
        run, results = load_run(run_dir)
        assert run.spec.api_key_used and run.spec.header_names == ("X-Secret-Token",)
        assert results[0].completion is not None  # a live answer: the key was accepted

        # a resume without the key is refused by the server in one line; with it, it goes through
        store = RunStore.open(run_dir)
        store.write_run(store.run.model_copy(update={"status": "interrupted"}))
        refused = run_cli("sweep", "--resume", str(run_dir))
        assert refused.returncode != 0 and "--api-key" in error_lines(refused)[-1]
        resumed = run_cli("sweep", "--resume", str(run_dir), *auth)
        assert resumed.returncode == 0, resumed.stderr

        compared = run_cli(
            "compare",
            "a",
            "b",
            "--base-url",
            server.base_url,
            "--base-url",
            server.base_url,
            *grid,
            *auth,
        )
        assert compared.returncode == 0, compared.stderr
        console = "".join(c.stdout + c.stderr for c in (swept, refused, resumed, compared))
    finally:
        server.stop()
    (compare_dir,) = home.glob("compare-*")
    assert "X-Secret-Token" in (compare_dir / "compare.json").read_text()  # the command line is kept...
    assert leaks(home, console) == []  # ...with the key and the header value masked


def test_a_key_with_a_line_break_is_bad_input_before_any_request(tmp_path):
    """A key read from a file with its newline would split the request head: refused (exit 2) in one
    line that does not show it, before anything is sent."""
    env = {**cli_env(), "RECALL_EVAL_API_KEY": "sk-from-a-file-123\n", "RECALL_EVAL_HOME": str(tmp_path)}
    completed = subprocess.run(
        cli_argv("sweep", "--base-url", "http://127.0.0.1:9", "--lengths", "400"),
        capture_output=True, text=True, timeout=120, env=env,
    )  # fmt: skip
    lines = error_lines(completed)
    assert completed.returncode == 2 and len(lines) == 1 and "line break" in lines[0], lines
    assert "sk-from-a-file" not in completed.stdout + completed.stderr
