"""Preflight: each check against the real thing it checks (an interpreter that lacks a module, a
package whose import fails, an installed sglang of another version, a bound port, a missing path),
and `sweep` / `serve` of a profile that cannot launch here: one line per failure, nothing started."""

from __future__ import annotations

import socket
import sys
from pathlib import Path

from launchers.argv import LaunchSpec
from launchers.preflight import (
    engine_failures,
    gpu_failures,
    model_path_failures,
    port_failures,
    visible_gpus,
)
from launchers.profiles import resolve_profile
from tests.e2e.cli import run_cli

NO_GPUS = {"CUDA_VISIBLE_DEVICES": ""}


def spec(module: str, env: dict[str, str] | None = None, port: int = 30000) -> LaunchSpec:
    return LaunchSpec(role="main", name="main", argv=(sys.executable, "-m", module), env=env or {}, port=port)


def fake_sglang(root: Path, version: str, body: str = "") -> Path:
    """An installed-looking sglang (dist-info + package) that shadows the real one on PYTHONPATH."""
    (root / "sglang").mkdir(parents=True)
    (root / "sglang" / "__init__.py").write_text("")
    (root / "sglang" / "launch_server.py").write_text(body)
    info = root / f"sglang-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: sglang\nVersion: {version}\n")
    return root


def test_engine_the_servers_python_cannot_find():
    profile = resolve_profile("dsv4-flash", {})
    (line,) = engine_failures(profile, [spec("no_such_engine_xyz.launch_server")])
    assert "cannot import no_such_engine_xyz.launch_server" in line and "No module named" in line
    assert line.endswith("reinstall recall-eval: pip install -e .")


def test_engine_whose_import_fails_names_the_error_and_the_install(tmp_path):
    root = fake_sglang(
        tmp_path, "0.5.23", "raise ImportError('libcuda.so.1: cannot open shared object file')\n"
    )
    profile = resolve_profile("dsv4-flash", {})
    (line,) = engine_failures(profile, [spec("sglang.launch_server", {"PYTHONPATH": str(root)})])
    assert "libcuda.so.1" in line and "pip install -e '.[sglang]'" in line
    # only finding the package (when another check already failed) does not run its code
    assert engine_failures(profile, [spec("sglang.launch_server", {"PYTHONPATH": str(root)})], False) == []


def test_bf16_patch_needs_its_sglang_version(tmp_path):
    root = fake_sglang(tmp_path, "0.5.24")
    profile = resolve_profile("dsv4-flash", {"index_k_dtype": "bf16"})
    env = {"PYTHONPATH": str(root), "SGLANG_DSV4_BF16_INDEX_K": "1"}
    (line,) = engine_failures(profile, [spec("sglang.launch_server", env)])
    assert "written for SGLang 0.5.23, found 0.5.24" in line and "index_k_dtype=fp8" in line
    fp8_env = {"PYTHONPATH": str(root)}  # fp8 needs no patch: any importable version launches
    assert engine_failures(resolve_profile("dsv4-flash", {}), [spec("sglang.launch_server", fp8_env)]) == []


def test_gpus_for_tp_and_pd():
    tp4 = resolve_profile("dsv4-flash", {})
    assert visible_gpus(NO_GPUS) == 0
    (line,) = gpu_failures(tp4, [spec("sglang.launch_server", NO_GPUS)])
    assert line.startswith("tp 4 needs 4 GPUs, 0 visible") and "--tp N" in line
    (pd,) = gpu_failures(resolve_profile("dsv4-flash-pd", {}), [spec("sglang.launch_server", NO_GPUS)])
    assert "needs 8 GPUs" in pd  # decode on GPUs 4-7
    assert gpu_failures(resolve_profile("reference", {}), [spec("launchers.reference.server", NO_GPUS)]) == []


def test_busy_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        port = sock.getsockname()[1]
        (line,) = port_failures([spec("x", port=port)])
    assert f"port {port} on 127.0.0.1 is already in use" in line


def test_model_path(tmp_path):
    missing = resolve_profile("dsv4-flash", {"model_path": str(tmp_path / "nope")})
    (line,) = model_path_failures(missing)
    assert "does not exist" in line and "--model-path" in line
    assert model_path_failures(resolve_profile("dsv4-flash", {"model_path": str(tmp_path)})) == []
    assert model_path_failures(resolve_profile("dsv4-flash", {})) == []  # a hub id: the engine fetches it


def test_sweep_of_a_profile_that_cannot_launch_starts_nothing(tmp_path, monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    home = tmp_path / "home"
    missing = tmp_path / "weights"
    done = run_cli("sweep", "--profile", "dsv4-flash", "--model-path", str(missing), home=home, cwd=tmp_path)
    assert done.returncode == 1, done.stderr
    lines = done.stderr.strip().splitlines()
    assert lines[0] == "error: profile 'dsv4-flash' cannot be launched here (nothing was started):"
    assert any(f"model path {missing} does not exist" in line for line in lines)
    assert any("tp 4 needs 4 GPUs, 0 visible" in line for line in lines)
    assert "resume" not in done.stderr and "Traceback" not in done.stderr
    assert not home.exists() or not any(home.iterdir())  # no run directory


def test_serve_prints_log_lines_without_markup(tmp_path):
    """A start-up death's log tail (with its [time] brackets) is shown as text, not as rich markup."""
    env_home = tmp_path / "home"
    # a KV pool of 5e7 tokens under a 1 GiB cap: the engine dies at start-up, as SGLang does
    args = ["serve", "reference", "--memory-limit-gb", "1", "--context-length", "50000000"]
    args += ["--mem-fraction", "0.9", "--log-dir", str(tmp_path / "logs")]
    done = run_cli(*args, home=env_home, cwd=tmp_path, timeout=180)
    assert done.returncode == 1
    out = done.stdout + done.stderr
    assert "[dim]" not in out and "[/dim]" not in out, out
    assert "  RuntimeError: Not enough memory. Please try to increase --mem-fraction-static" in out, out
