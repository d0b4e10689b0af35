"""Servers as they really are, through the command line and real sockets: each behaviour of
tests/e2e/real_world_server.py that used to end a run (or turn every case into `error`) is met by
adapting. Every case is classified, the run exits 0 where the server answered, recall is right, and
what the run adapted is in run.json (`adaptations`) and in the report."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import httpx
import pytest

from recall_eval.chat_client import MAX_REASONING_CHARS
from recall_eval.exit_codes import EXIT_BUDGET_TOO_SMALL
from recall_eval.store import load_run
from recall_eval.thinking import THINKING_MAX_TOKENS
from recall_eval.types import Result, Run
from tests.e2e.cli import error_lines, run_cli
from tests.e2e.served_process import free_port, start_served

SERVER = Path(__file__).with_name("real_world_server.py")
GRID = ["--lengths", "200", "--depths", "0,100", "--trials", "1"]


class Served:
    """A real_world_server process: its URL, and what its chat requests carried (GET /seen)."""

    def __init__(self, tmp_path: Path, *flags: str, scheme: str = "http"):
        self.port = free_port()
        argv = [sys.executable, str(SERVER), str(self.port), *flags]
        self.process = start_served(
            argv, tmp_path / "server.log", self.port, ready_path="/ready", scheme=scheme
        )
        self.url = self.process.base_url

    def seen(self) -> list[dict]:
        return httpx.get(f"{self.url}/seen", verify=False, trust_env=False).json()

    def stop(self) -> None:
        self.process.stop()


@pytest.fixture
def served(tmp_path):
    started: list[Served] = []

    def start(*flags: str, scheme: str = "http") -> Served:
        server = Served(tmp_path, *flags, scheme=scheme)
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()


def sweep(out: Path, *args: str, grid: list[str] = GRID):
    completed = run_cli("sweep", *grid, "--out", str(out), *args, timeout=300)
    runs = [path for path in out.iterdir() if (path / "run.json").is_file()] if out.is_dir() else []
    run, results = load_run(runs[0]) if runs else (None, [])
    return completed, run, results, (runs[0] if runs else None)


def report_text(run_dir: Path) -> str:
    return (run_dir / "report.html").read_text()


def all_pass(results: list[Result]) -> bool:
    return bool(results) and all(result.outcome == "pass" for result in results)


def _check_adapted(run: Run, run_dir: Path, name: str, words: str) -> None:
    assert name in run.adaptations, run.adaptations
    assert words in run.adaptations[name], run.adaptations[name]
    assert f'data-adaptation="{name}"' in report_text(run_dir)


# --- base URL forms ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("server_flags", "suffix", "extra", "adaptation"),
    [
        ((), "/v1", (), "base_url"),
        ((), "/v1/", (), "base_url"),
        (("--prefix", "/api"), "/api/v1", (), "base_url"),
        ((), "", (), None),
        (("--no-models",), "", ("--model", "real-world"), "models_endpoint"),
    ],
    ids=["v1", "v1-slash", "gateway-prefix", "bare", "no-models-with-model"],
)
def test_any_base_url_form_reaches_the_api(served, tmp_path, server_flags, suffix, extra, adaptation):
    server = served("--tokenize", *server_flags)
    completed, run, results, run_dir = sweep(tmp_path / "out", "--base-url", server.url + suffix, *extra)
    assert completed.returncode == 0, completed.stderr
    assert all_pass(results), [(r.outcome, r.error) for r in results]
    assert run.length_measure == "server:/v1/tokenize"  # the native endpoint, relative to the root
    assert run.server_info["api_root"] == server.url + suffix.removesuffix("/").removesuffix("/v1") + "/v1"
    if adaptation is None:
        assert run.adaptations == {}
    else:
        _check_adapted(run, run_dir, adaptation, "/v1" if adaptation == "base_url" else "--model real-world")
    if adaptation == "models_endpoint":  # one warning line, not an error
        assert "/v1/models answered HTTP 404" in completed.stderr


def test_no_models_endpoint_without_model_says_what_to_pass(served, tmp_path):
    server = served("--no-models")
    completed, _, _, _ = sweep(tmp_path / "out", "--base-url", server.url + "/v1")
    assert completed.returncode == 1
    [line] = error_lines(completed)[-1:]
    assert "answered HTTP 404" in line and "--model NAME" in line and "Traceback" not in completed.stderr


def test_a_redirect_is_followed_on_gets_and_named_on_posts(served, tmp_path):
    """The server moved: /v1/models is followed to its new place; a POST is not re-sent blindly, its
    case ends `error` with one line naming where the server redirects, sent once (not retried)."""
    server = served("--tokenize", "--moved-to", "/new")
    completed, _, results, _ = sweep(tmp_path / "out", "--base-url", server.url)
    assert completed.returncode == 3, completed.stderr  # no answer from a live model: nothing measured
    assert results and {result.outcome for result in results} == {"error"}
    moved_to = f"{server.url}/new/v1/chat/completions"
    assert all(
        f"redirects the request to {moved_to}; give that URL as --base-url" in r.error for r in results
    )
    chats = [s for s in server.seen() if s.get("redirected") == "POST" and s.get("stream")]
    assert len(chats) == len(results)  # one request per case: a redirect is not retried
    assert any(s.get("redirected") == "GET" for s in server.seen())


# --- calibration manners -----------------------------------------------------------------------------


def test_rate_limits_during_calibration_are_waited_out(served, tmp_path):
    """Every third length measurement answers 429 with Retry-After: the measurement waits and goes on,
    with the request knobs that change the rendered prompt."""
    server = served("--rate-limit-every", "3")
    kwargs = '{"thinking": false}'
    completed, run, results, _ = sweep(
        tmp_path / "out", "--base-url", server.url, "--chat-template-kwargs", kwargs, "--max-tokens", "16"
    )
    assert completed.returncode == 0, completed.stderr
    assert all_pass(results), [(r.outcome, r.error) for r in results]
    assert run.length_measure == "server:usage.prompt_tokens" and run.estimated_length_suites == ()
    counting = [request for request in server.seen() if request["counting"]]
    assert sum(request.get("answered") == 429 for request in counting) >= 3
    assert all(request["chat_template_kwargs"] == {"thinking": False} for request in counting)
    assert all("stream_options" not in request["keys"] for request in counting)


def test_a_server_that_stops_answering_measurements_gets_estimated_lengths(served, tmp_path):
    """After the tokenizer probe every length measurement answers 429: once the retries are spent the
    run measures on with estimated lengths, says so, flags it, and the cases still run."""
    server = served("--rate-limit-after", "2")
    completed, run, results, run_dir = sweep(tmp_path / "out", "--base-url", server.url)
    assert completed.returncode == 0, completed.stderr
    assert all_pass(results), [(r.outcome, r.error) for r in results]
    assert run.estimated_length_suites == ("needle",)
    _check_adapted(run, run_dir, "lengths", "stopped answering length measurements")
    assert "HTTP 429" in run.adaptations["lengths"]


def test_a_context_refusal_during_calibration_makes_that_case_too_long(served, tmp_path):
    server = served("--context", "1500")
    completed, run, results, run_dir = sweep(
        tmp_path / "out",
        "--base-url",
        server.url,
        grid=["--lengths", "300,3000", "--depths", "50", "--trials", "1"],
    )
    assert completed.returncode == 0, completed.stderr
    outcomes = {result.target_tokens: result for result in results}
    assert outcomes[300].outcome == "pass"
    assert outcomes[3000].outcome == "too_long" and "longer than its context" in outcomes[3000].error
    _check_adapted(run, run_dir, "context_refusals", "too_long, not sent")
    assert "report this as a bug" not in completed.stderr


def test_usage_that_does_not_follow_the_prompt_falls_back_to_estimates(served, tmp_path):
    server = served("--usage", "constant")
    completed, run, results, run_dir = sweep(tmp_path / "out", "--base-url", server.url)
    assert completed.returncode == 0, completed.stderr
    assert all_pass(results), [(r.outcome, r.error) for r in results]
    assert run.estimated_length_suites == ("needle",) and run.length_measure == "tiktoken:cl100k_base"
    _check_adapted(run, run_dir, "lengths", "do not follow the prompt")
    assert 'id="length-estimates"' in report_text(run_dir)
    assert "do not follow the prompt" in completed.stderr and "report this as a bug" not in completed.stderr


# --- request shape ------------------------------------------------------------------------------------


def test_a_rejected_stream_options_is_dropped_for_the_rest_of_the_run(served, tmp_path):
    server = served("--tokenize", "--reject-stream-options")
    completed, run, results, run_dir = sweep(
        tmp_path / "out",
        "--base-url",
        server.url,
        grid=["--lengths", "200", "--depths", "0,50,100", "--trials", "1"],
    )
    assert completed.returncode == 0, completed.stderr
    assert all_pass(results), [(r.outcome, r.error) for r in results]
    _check_adapted(run, run_dir, "dropped_field:stream_options", "rejected `stream_options`")
    streamed = [request for request in server.seen() if not request["counting"]]
    assert sum("stream_options" in request["keys"] for request in streamed) == 1  # asked once, then never
    assert completed.stderr.count("rejected `stream_options`") == 1


def test_a_null_in_extra_body_removes_the_key(served, tmp_path):
    server = served("--tokenize", "--reject-stream-options")
    completed, run, results, _ = sweep(
        tmp_path / "out", "--base-url", server.url, "--extra-body", '{"stream_options": null}'
    )
    assert completed.returncode == 0, completed.stderr
    assert all_pass(results) and run.adaptations == {}
    assert all("stream_options" not in request["keys"] for request in server.seen())


def test_a_json_answer_to_a_stream_request_is_scored_from_its_body(served, tmp_path):
    server = served("--tokenize", "--json-only")
    completed, run, results, run_dir = sweep(tmp_path / "out", "--base-url", server.url)
    assert completed.returncode == 0, completed.stderr
    assert all_pass(results), [(r.outcome, r.error) for r in results]
    assert all(r.completion.streamed is False and r.completion.ttft_s is None for r in results)
    assert all(r.completion.itl_s == () and r.server_prompt_tokens for r in results)
    _check_adapted(run, run_dir, "json_answers", "not measured")


# --- TLS ------------------------------------------------------------------------------------------------


@pytest.fixture
def tls_server(served, tmp_path):
    trustme = pytest.importorskip("trustme")  # a test dependency (pyproject's `test` extra)
    authority = trustme.CA()
    certificate = authority.issue_cert("127.0.0.1", "localhost")
    ca_file, cert_file, key_file = tmp_path / "ca.pem", tmp_path / "cert.pem", tmp_path / "key.pem"
    authority.cert_pem.write_to_path(str(ca_file))
    certificate.private_key_pem.write_to_path(str(key_file))
    certificate.cert_chain_pems[0].write_to_path(str(cert_file))
    server = served("--tokenize", "--certfile", str(cert_file), "--keyfile", str(key_file), scheme="https")
    return server, ca_file


def _no_ca_env(monkeypatch) -> None:
    for name in ("REQUESTS_CA_BUNDLE", "SSL_CERT_FILE", "CURL_CA_BUNDLE", "SSL_CERT_DIR"):
        monkeypatch.delenv(name, raising=False)


def test_an_untrusted_certificate_is_one_line_naming_it(tls_server, tmp_path, monkeypatch):
    server, _ = tls_server
    _no_ca_env(monkeypatch)
    completed, _, _, _ = sweep(tmp_path / "out", "--base-url", server.url + "/v1")
    assert completed.returncode == 1
    line = error_lines(completed)[-1]
    assert "certificate is not trusted" in line and "--ca-bundle" in line and "--insecure" in line, line
    assert "is the server running" not in completed.stderr and "Traceback" not in completed.stderr


@pytest.mark.parametrize("how", ["--ca-bundle", "REQUESTS_CA_BUNDLE", "SSL_CERT_FILE"])
def test_a_private_ca_is_trusted_when_given(tls_server, tmp_path, monkeypatch, how):
    server, ca_file = tls_server
    _no_ca_env(monkeypatch)
    args = ["--base-url", server.url + "/v1"]
    if how == "--ca-bundle":
        args += ["--ca-bundle", str(ca_file)]
    else:
        monkeypatch.setenv(how, str(ca_file))
    completed, run, results, _ = sweep(tmp_path / "out", *args)
    assert completed.returncode == 0, completed.stderr
    assert all_pass(results), [(r.outcome, r.error) for r in results]
    assert "tls" not in run.adaptations


def test_insecure_skips_the_check_and_says_so(tls_server, tmp_path, monkeypatch):
    server, _ = tls_server
    _no_ca_env(monkeypatch)
    completed, run, results, run_dir = sweep(tmp_path / "out", "--base-url", server.url, "--insecure")
    assert completed.returncode == 0, completed.stderr
    assert all_pass(results)
    _check_adapted(run, run_dir, "tls", "not checked")
    assert "--insecure: the server's TLS certificate was not checked" in completed.stderr


# --- proxies and credentials in the URL -------------------------------------------------------------


def test_a_dead_proxy_does_not_stand_between_the_harness_and_the_engine_it_launched(tmp_path, monkeypatch):
    dead = f"http://127.0.0.1:{free_port()}"
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.setenv(name, dead)
    for name in ("NO_PROXY", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
    completed, run, results, _ = sweep(
        tmp_path / "out", "--context-length", "2048", "--port", str(free_port()),
        grid=["--lengths", "338", "--depths", "50", "--trials", "1"],
    )  # fmt: skip
    assert completed.returncode == 0, completed.stderr
    assert run.status == "finished" and len(results) == 1
    assert results[0].outcome in ("pass", "miss", "empty", "truncated")  # a live answer from the engine


@pytest.mark.parametrize("reader", ["fast", "httpx"])
def test_credentials_in_the_url_are_sent_by_both_readers_and_never_written(
    served, tmp_path, monkeypatch, reader
):
    password = "s3cret-pass-4b1d"
    server = served("--tokenize", "--basic", f"probe:{password}")
    if reader == "httpx":
        monkeypatch.setenv("RECALL_EVAL_HTTP", "httpx")
    else:
        monkeypatch.delenv("RECALL_EVAL_HTTP", raising=False)
    url = server.url.replace("http://", f"http://probe:{password}@") + "/v1"
    completed, run, results, run_dir = sweep(tmp_path / "out", "--base-url", url)
    assert completed.returncode == 0, completed.stderr
    assert all_pass(results), [(r.outcome, r.error) for r in results]
    assert all(request["authorization"].startswith("Basic ") for request in server.seen())
    written = [
        path.name for path in run_dir.rglob("*") if path.is_file() and password.encode() in path.read_bytes()
    ]
    assert written == [] and password not in completed.stdout + completed.stderr


# --- thinking models ----------------------------------------------------------------------------------


def test_a_long_reasoner_under_a_big_budget_is_scored_on_its_answer(served, tmp_path):
    """12,000 words of reasoning (~80,000 characters) before a one-line answer: the answer cap counts
    answer text only; the reasoning is stored apart, cut at MAX_REASONING_CHARS and marked so."""
    server = served("--tokenize", "--reason-words", "12000")
    completed, run, results, _ = sweep(
        tmp_path / "out", "--base-url", server.url, "--max-tokens", "32768", "--reasoning-effort", "high",
        grid=["--lengths", "200", "--depths", "50", "--trials", "1"],
    )  # fmt: skip
    assert completed.returncode == 0, completed.stderr
    [result] = results
    assert result.outcome == "pass", (result.error, result.answer[:200])
    assert result.answer == result.expected[0]
    assert result.completion.reasoning_cut and len(result.completion.reasoning) == MAX_REASONING_CHARS
    assert "thinking_budget" not in run.adaptations  # the budget was given


def test_a_reasoner_under_the_default_budget_gets_the_thinking_budget(served, tmp_path):
    server = served("--tokenize", "--reason-words", "60")
    completed, run, results, run_dir = sweep(tmp_path / "out", "--base-url", server.url)
    assert completed.returncode == 0, completed.stderr
    assert all_pass(results), [(r.outcome, r.error) for r in results]
    _check_adapted(run, run_dir, "thinking_budget", f"{THINKING_MAX_TOKENS} tokens instead of 32")
    assert completed.stderr.count("the server reasons before answering") == 1


def test_a_resume_starts_with_the_budget_the_run_learned(served, tmp_path):
    """An interrupted run that had raised its budget resumes at the thinking budget from its first
    answer request: no case is sent at the small budget and cut inside its reasoning again."""
    server = served("--tokenize", "--reason-words", "60")
    completed, run, results, run_dir = sweep(tmp_path / "out", "--base-url", server.url)
    assert completed.returncode == 0, completed.stderr
    assert "thinking_budget" in run.adaptations
    # as an interrupt leaves it: one case recorded, the run marked interrupted
    lines = (run_dir / "results.jsonl").read_text().splitlines()
    (run_dir / "results.jsonl").write_text(lines[0] + "\n")
    stored = json.loads((run_dir / "run.json").read_text())
    (run_dir / "run.json").write_text(json.dumps({**stored, "status": "interrupted"}))
    before = len(server.seen())
    resumed = run_cli("sweep", "--resume", str(run_dir), "--no-report", timeout=300)
    assert resumed.returncode == 0, resumed.stderr
    answers = [request for request in server.seen()[before:] if not request["counting"]]
    assert [request["max_tokens"] for request in answers] == [THINKING_MAX_TOKENS], answers
    assert "the server reasons before answering" not in resumed.stderr  # said once, in the first session
    _, final = load_run(run_dir)
    assert all_pass(final) and len(final) == len(results)


def test_a_budget_eaten_by_reasoning_is_said_with_its_own_exit_code(served, tmp_path):
    server = served("--tokenize", "--reason-words", "60")
    completed, run, results, run_dir = sweep(tmp_path / "out", "--base-url", server.url, "--max-tokens", "32")
    assert completed.returncode == EXIT_BUDGET_TOO_SMALL, completed.stderr
    assert {result.outcome for result in results} == {"truncated"}
    assert "budget" in error_lines(completed)[-1] and "--max-tokens" in error_lines(completed)[-1]
    report = report_text(run_dir)
    assert 'id="budget-banner"' in report and 'id="recall-not-measured"' in report
    assert 'id="summary-recall"' not in report  # no "recall 0%" card
    assert "recall not measured" in completed.stdout + completed.stderr
    assert json.loads((run_dir / "run.json").read_text())["status"] == "finished"
