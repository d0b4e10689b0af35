"""Lifecycle against real processes (a tiny stub HTTP server): readiness, deaths, relaunch, stop by group."""

from __future__ import annotations

import os
import signal
import socket
import sys
import time
from pathlib import Path

import httpx
import psutil
import pytest

from launchers.argv import LaunchSpec
from launchers.classify import classify_death
from launchers.lifecycle import LaunchedServer, ServerStartError
from launchers.ports import free_port
from launchers.processes import group_members
from recall_eval.errors import UserError
from recall_eval.types import Profile

STUB = str(Path(__file__).with_name("stub_server.py"))


def stub_spec(port: int, *args: str, name: str = "main") -> LaunchSpec:
    argv = (sys.executable, STUB, "--port", str(port), *args)
    return LaunchSpec(role="main", name=name, argv=argv, port=port, is_endpoint=True)


def server(tmp_path: Path, *specs: LaunchSpec, timeout_s: float = 20.0, **kwargs) -> LaunchedServer:
    profile = Profile(
        name="stub", engine="reference", served_model_name="stub-model", ready_timeout_s=timeout_s
    )
    return LaunchedServer(profile, list(specs), tmp_path, stop_grace_s=3.0, **kwargs)


def nothing_left(pids: list[int]) -> bool:
    return all(not group_members(pid) for pid in pids) and not any(
        psutil.pid_exists(pid) and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE for pid in pids
    )


def test_ready_via_health_generate_then_stop_leaves_nothing(tmp_path):
    port = free_port()
    events: list[str] = []
    launched = server(tmp_path, stub_spec(port, "--ready-after", "1.0"), echo=events.append)
    with launched:
        seconds = launched.start()
        pids = launched.pids
        assert seconds >= 1.0 and launched.time_to_ready_s == seconds
        assert launched.endpoint.base_url == f"http://127.0.0.1:{port}"
        assert launched.endpoint.model == "stub-model"
        assert launched.server_info["server_info"]["version"] == "stub-1"
        assert launched.poll_death() is None
        assert os.getpgid(pids[0]) == pids[0]  # its own process group
        assert any(event.startswith("ready in ") for event in events)
    assert nothing_left(pids)
    log = (tmp_path / "server-main.log").read_text()
    assert "recall-eval: start of main" in log and "[stub] pid" in log


def test_falls_back_to_v1_models_listing_the_model(tmp_path):
    launched = server(tmp_path, stub_spec(free_port(), "--no-health-generate", "--ready-after", "0.5"))
    with launched:
        assert launched.start() >= 0.5


def test_death_before_ready_fails_at_once_with_cause_and_lines(tmp_path):
    oom = "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static."
    launched = server(
        tmp_path, stub_spec(free_port(), "--die-after", "0.3", "--say", "loading", "--say", oom)
    )
    started = time.monotonic()
    with pytest.raises(ServerStartError) as info:
        launched.start()
    assert time.monotonic() - started < 10
    err = info.value
    assert err.death is not None and err.death.outcome == "oom" and err.death.log_line == oom
    assert oom in err.tail and "\n" not in str(err)
    assert "main server died before it was ready" in str(err) and "server-main.log" in str(err)
    assert launched.pids == []


def test_busy_port_is_refused_before_launch(tmp_path):
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        port = sock.getsockname()[1]
        launched = server(tmp_path, stub_spec(port))
        with pytest.raises(UserError, match=f"port {port} on 127.0.0.1 is already in use") as info:
            launched.start()
        assert f"pid {os.getpid()}" in str(info.value)
    assert not (tmp_path / "server-main.log").exists()


def test_not_ready_in_time(tmp_path):
    launched = server(tmp_path, stub_spec(free_port(), "--ready-after", "60"), timeout_s=1.5)
    with pytest.raises(ServerStartError, match="not ready after 2 s"):
        launched.start()
    assert launched.pids == []


def test_kill_9_is_a_classified_death_then_relaunch(tmp_path):
    port = free_port()
    launched = server(tmp_path, stub_spec(port))
    with launched:
        launched.start()
        (pid,) = launched.pids
        os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + 5
        while launched.poll_death() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        death = launched.poll_death()
        assert death is not None and death.outcome == "crash" and death.exit_code == -9
        assert "SIGKILL" in death.reason
        assert launched.poll_death() == death  # stays until the relaunch
        seconds = launched.relaunch()
        assert seconds > 0 and launched.relaunches == 1 and launched.poll_death() is None
        assert launched.pids != [pid]
    log = (tmp_path / "server-main.log").read_text()
    assert "relaunch 1, attempt 1/3 of main" in log


def test_relaunch_gives_up_after_bounded_attempts(tmp_path):
    spec = stub_spec(free_port(), "--die-after", "0.1", "--say", "ModuleNotFoundError: No module named 'x'")
    launched = server(tmp_path, spec, relaunch_attempts=2, relaunch_backoff_s=0.1)
    with pytest.raises(ServerStartError, match="did not come back after 2 relaunch attempts") as info:
        launched.relaunch()
    assert info.value.death is not None and info.value.death.outcome == "crash"
    assert (tmp_path / "server-main.log").read_text().count("recall-eval: relaunch 1, attempt") == 2


def test_stop_escalates_to_sigkill_for_the_whole_group(tmp_path):
    launched = server(tmp_path, stub_spec(free_port(), "--stubborn-child"))
    launched.start()
    (pid,) = launched.pids
    deadline = time.monotonic() + 5
    while len(group_members(pid)) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    members = [proc.pid for proc in group_members(pid)]
    assert len(members) == 2
    launched.stop()
    assert nothing_left(members)


def test_pd_like_deployment_death_of_any_part_is_a_death(tmp_path):
    first, endpoint = free_port(), free_port()
    part = LaunchSpec(
        role="prefill", name="prefill", argv=(sys.executable, STUB, "--port", str(first)), port=first
    )
    launched = server(tmp_path, part, stub_spec(endpoint, name="router"))
    with launched:
        launched.start()
        os.kill(launched.pids[0], signal.SIGKILL)
        deadline = time.monotonic() + 5
        while launched.poll_death() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        death = launched.poll_death()
        assert death is not None and death.reason.startswith("prefill: ")
    assert (tmp_path / "server-prefill.log").exists() and (tmp_path / "server-router.log").exists()


TOO_LONG_LINE = (
    "[2026-11-29 10:01:00] ValueError: The input (9000 tokens) is longer than the model's context length "
    "(8192 tokens)."
)
OOM_LINE = "[2026-11-29 10:01:00 TP0] Prefill out of memory. Try to lower your batch size."


def _await_death(launched: LaunchedServer):
    deadline = time.monotonic() + 10
    while launched.poll_death() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    return launched.poll_death()


@pytest.mark.parametrize(
    ("old_line", "ending", "outcome", "reason"),
    [
        (TOO_LONG_LINE, "/stub/signal?num=11", "crash", "SIGSEGV"),  # old too-long, new segfault
        (OOM_LINE, "/stub/exit?code=0", "crash", "exited with code 0"),  # old OOM, new clean exit
    ],
)
def test_death_cause_ignores_lines_from_before_the_last_answer(tmp_path, old_line, ending, outcome, reason):
    port = free_port()
    launched = server(tmp_path, stub_spec(port))
    with launched:
        launched.start()
        base = launched.endpoint.base_url
        httpx.get(f"{base}/stub/say", params={"line": old_line}, timeout=5)
        launched.note_served()  # the server answered after that line: it was alive and well
        httpx.get(f"{base}/stub/say", params={"line": "[2026-11-29 10:02:00] Decode batch. #running-req: 1"})
        with pytest.raises(httpx.TransportError):
            httpx.get(f"{base}{ending}", timeout=5)
        death = _await_death(launched)
        assert death is not None
        assert (death.outcome, death.log_line) == (outcome, None), death
        assert reason in death.reason
    # the same history read whole would have blamed the old line: the window is what tells them apart
    whole = classify_death(death.exit_code, (tmp_path / "server-main.log").read_text().splitlines())
    assert whole.outcome in ("too_long", "oom") and whole.log_line == old_line


def test_death_cause_from_a_line_after_the_last_answer(tmp_path):
    launched = server(tmp_path, stub_spec(free_port()))
    with launched:
        launched.start()
        base = launched.endpoint.base_url
        httpx.get(f"{base}/stub/say", params={"line": TOO_LONG_LINE}, timeout=5)
        launched.note_served()
        httpx.get(f"{base}/stub/say", params={"line": OOM_LINE}, timeout=5)
        with pytest.raises(httpx.TransportError):
            httpx.get(f"{base}/stub/exit", params={"code": "1"}, timeout=5)
        death = _await_death(launched)
        assert death is not None and death.outcome == "oom" and death.log_line == OOM_LINE
