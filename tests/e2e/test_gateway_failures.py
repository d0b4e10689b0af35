"""Servers, gateways and proxies failing as they do in the field (tests/e2e/gateway_server.py, real
processes and sockets, through the command line): each failure is one line with the status, the
server's own message and what to do; a hung server is named as hung with the option that waits longer;
a server that dies mid-run stops the run (interrupted, resumable) instead of turning the rest into
errors; a gateway's context limit under LiteLLM's or OpenRouter's name is read."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from recall_eval.store import load_run
from tests.e2e.cli import error_lines, run_cli
from tests.e2e.reference_server import ServerProcess
from tests.e2e.served_process import free_port, start_served

SERVER = Path(__file__).with_name("gateway_server.py")
GRID = ["--lengths", "200", "--depths", "0,50,100", "--trials", "1"]


def start_gateway(folder: Path, *flags: str, port: int | None = None) -> ServerProcess:
    port = port or free_port()
    argv = [sys.executable, str(SERVER), str(port), *flags]
    return start_served(argv, folder / f"gateway-{port}.log", port, ready_path="/ready")


@pytest.fixture
def gateway(tmp_path):
    started: list[ServerProcess] = []

    def start(*flags: str, port: int | None = None) -> ServerProcess:
        server = start_gateway(tmp_path, *flags, port=port)
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()


def sweep(tmp_path: Path, url: str, *args: str, grid: list[str] = GRID) -> subprocess.CompletedProcess[str]:
    return run_cli("sweep", "--base-url", url, *grid, "--out", str(tmp_path / "runs"), *args, timeout=300)


def one_error_line(completed: subprocess.CompletedProcess[str]) -> str:
    assert "Traceback" not in completed.stderr, completed.stderr
    lines = error_lines(completed)
    assert lines and lines[-1].startswith("error: "), completed.stderr
    return lines[-1]


# --- item 10: refusals on /v1/models ---------------------------------------------------------------


def test_a_proxys_html_502_page_is_one_line_with_its_title(gateway, tmp_path):
    """nginx's 11-line 502 page becomes its title on the one error line; no HTML reaches the console."""
    server = gateway("--models-status", "502", "--models-body", "nginx")
    completed = sweep(tmp_path, server.base_url)
    assert completed.returncode == 1
    line = one_error_line(completed)
    assert "HTTP 502" in line and "502 Bad Gateway" in line and "overloaded" in line, line
    assert "<" not in completed.stderr and "padding" not in completed.stderr, completed.stderr
    assert len(error_lines(completed)) == 1, completed.stderr


def test_a_proxy_asking_for_credentials_says_so(gateway, tmp_path):
    """407 from an authenticating forward proxy: the status, the proxy's own words, where credentials go."""
    server = gateway("--models-status", "407", "--models-body", "squid")
    completed = sweep(tmp_path, server.base_url, "--model", "gateway-model")  # --model does not hide it
    assert completed.returncode == 1
    line = one_error_line(completed)
    assert "HTTP 407 Proxy Authentication Required" in line and "Cache Access Denied" in line, line
    assert "HTTPS_PROXY" in line and "not an OpenAI-compatible" not in line, line


def test_a_gateways_400_for_a_bad_key_keeps_its_message(gateway, tmp_path):
    """LiteLLM answers a bad key with 400 and a JSON error: its message and the key options are shown."""
    server = gateway("--models-status", "400", "--models-body", "litellm")
    completed = sweep(tmp_path, server.base_url, "--api-key", "sk-wrong-key-1234567890")
    assert completed.returncode == 1
    line = one_error_line(completed)
    assert "HTTP 400 Bad Request" in line and "Invalid proxy server token passed" in line, line
    assert "--api-key" in line and "not an OpenAI-compatible" not in line, line
    assert "sk-wrong-key-1234567890" not in completed.stderr


def test_another_4xx_shows_the_first_line_of_its_text(gateway, tmp_path):
    server = gateway("--models-status", "404", "--models-body", "text")
    line = one_error_line(sweep(tmp_path, server.base_url))
    assert "HTTP 404 Not Found: upstream refused the request" in line and "second line" not in line, line
    assert "--base-url" in line and "--model NAME" in line, line


# --- item 9: a server that accepts and never answers -------------------------------------------------


@pytest.fixture
def hung_server(tmp_path):
    port = free_port()
    log = (tmp_path / "hung.log").open("wb")
    process = subprocess.Popen(
        [sys.executable, str(SERVER), str(port), "--hang"], stdout=log, stderr=subprocess.STDOUT,
        start_new_session=True,
    )  # fmt: skip
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            time.sleep(0.1)
    server = ServerProcess(process, f"http://127.0.0.1:{port}", tmp_path / "hung.log")
    yield server
    server.stop()
    log.close()


def test_a_hung_server_is_named_hung_with_the_option_that_waits_longer(hung_server, tmp_path):
    """Connected, no answer: said as that (not "is the server running?"), with --probe-timeout and
    the seconds waited; not retried (it was three tries of 10 s), so it ends after one wait."""
    completed = sweep(tmp_path, hung_server.base_url, "--probe-timeout", "2")
    assert completed.returncode == 1
    line = one_error_line(completed)
    assert "accepted the connection but sent no response" in line and "in 2 s" in line, line
    assert "--probe-timeout" in line and "is the server running" not in line, line
    # the fixture's readiness check, then one probe (not three)
    assert hung_server.log().count("accepted connection") == 2, hung_server.log()


# --- item 11: a gateway's context limit ---------------------------------------------------------------


@pytest.mark.parametrize("field", ["max_input_tokens", "context_length", "model_info"])
def test_a_gateways_context_limit_is_read(gateway, tmp_path, field):
    """LiteLLM's max_input_tokens (top level, or in model_info) and OpenRouter's context_length are the
    server's context limit: a case longer than it is too_long, not sent."""
    card = '{"model_info": {"max_input_tokens": 500}}' if field == "model_info" else f'{{"{field}": 500}}'
    server = gateway("--card", card)
    completed = sweep(
        tmp_path, server.base_url, grid=["--lengths", "200,900", "--depths", "50", "--trials", "1"]
    )
    assert completed.returncode == 0, completed.stderr
    (run_dir,) = (tmp_path / "runs").iterdir()
    run, results = load_run(run_dir)
    assert run.server_info["max_model_len"] == 500
    outcomes = {result.target_tokens: result.outcome for result in results}
    assert outcomes == {200: "pass", 900: "too_long"}, outcomes


# --- item 8: a server that dies mid-run ---------------------------------------------------------------


def test_a_server_that_dies_mid_run_stops_it_interrupted_and_resume_finishes(gateway, tmp_path):
    """After the server is gone (connection refused on repeated probes) the run stops: interrupted, the
    resume line, exit 1, no case recorded as error; with the server back, resume runs the rest."""
    port = free_port()
    gateway("--die-after", "2", port=port)
    grid = ["--lengths", "200", "--depths", "0..100:6", "--trials", "1"]
    started = time.monotonic()
    completed = sweep(tmp_path, f"http://127.0.0.1:{port}", grid=grid)
    took = time.monotonic() - started
    assert completed.returncode == 1, completed.stderr
    line = one_error_line(completed)
    assert "refuses connections" in line and "recall-eval sweep --resume" in line, line
    (run_dir,) = (tmp_path / "runs").iterdir()
    run, results = load_run(run_dir)
    assert run.status == "interrupted" and "refuses connections" in (run.note or "")
    # the two answers given before the exit passed; nothing became `error`
    assert [result.outcome for result in results] == ["pass", "pass"], results
    assert took < 60, took

    gateway(port=port)  # the server is back on the same port
    resumed = run_cli("sweep", "--resume", str(run_dir), timeout=300)
    assert resumed.returncode == 0, resumed.stderr
    run, results = load_run(run_dir)
    assert run.status == "finished" and len(results) == 6
    assert {result.outcome for result in results} == {"pass"}
