"""Calibration is per case: a case that cannot reach its target within tolerance is sent at its nearest
length and flagged off target, with why; the other cases keep their exact lengths and the run is not
switched to tiktoken estimates.

Through tests/e2e/real_world_server.py with --tokenize --coarse-chats 20: a chat of several messages
(multiturn) counts in whole steps of 20 tokens, so at a 630-token target (±8) its nearest sizes are 620
and 640; a one-message prompt (needle) counts exactly. Before the fix such a case either ended the run's
exact lengths (a search that did not settle switched every case to tiktoken and blamed the server) or was
sent silently off target."""

from __future__ import annotations

from recall_eval.calibration import OFF_TARGET, tolerance
from tests.e2e.test_real_world_servers import served, sweep  # noqa: F401 (served: the fixture)


def test_an_unreachable_case_is_flagged_and_the_rest_stay_exact(served, tmp_path):  # noqa: F811
    server = served("--tokenize", "--coarse-chats", "20")
    completed, run, results, _ = sweep(
        tmp_path / "out", "--base-url", server.url, "--suite", "needle,multiturn",
        grid=["--lengths", "630", "--depths", "0,50,100", "--trials", "1"],
    )  # fmt: skip
    assert completed.returncode in (0, 4), completed.stderr
    assert run.length_measure == "server:/v1/tokenize" and run.estimated_length_suites == ()
    assert "lengths" not in run.adaptations  # nothing was blamed on the server's counts
    needle = [r for r in results if r.suite == "needle"]
    multiturn = [r for r in results if r.suite == "multiturn"]
    assert len(needle) == 3 and len(multiturn) == 3
    for result in needle:  # exact: within tolerance, not flagged
        assert abs(result.prompt_tokens - 630) <= tolerance(630) and not result.length_off_target
        assert OFF_TARGET not in result.params
    for result in multiturn:  # flagged, with its real length and why
        assert result.prompt_tokens in (620, 640) and result.length_off_target, result
        assert result.server_prompt_tokens == result.prompt_tokens
        why = result.params[OFF_TARGET]
        assert "630±8" in why and f"sent at {result.prompt_tokens} tokens" in why, why
    assert "could not reach the target length within tolerance" in completed.stderr
