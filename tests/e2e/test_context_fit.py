"""Context fit counts the answer budget: a prompt that fits the server's context alone but not with its
answer budget is `too_long`, never sent, never in recall, with one line saying by how much.

Through tests/e2e/real_world_server.py with --context 1000 --advertise-context --cut-answers: its
/v1/models says max_model_len 1000, and a request whose prompt fits but whose answer does not is answered
with the answer cut where the context ends, as llama.cpp does (before the fix such a case was sent, cut
after a few tokens and counted `truncated` in recall)."""

from __future__ import annotations

from tests.e2e.test_real_world_servers import served, sweep  # noqa: F401 (served: the fixture)


def test_prompt_plus_budget_over_the_context_is_too_long_and_not_sent(served, tmp_path):  # noqa: F811
    server = served("--tokenize", "--context", "1000", "--advertise-context", "--cut-answers")
    completed, run, results, _ = sweep(
        tmp_path / "out", "--base-url", server.url, "--max-tokens", "64",
        grid=["--lengths", "600,985", "--depths", "50", "--trials", "1"],
    )  # fmt: skip
    assert completed.returncode == 0, completed.stderr
    by_length = {result.target_tokens: result for result in results}
    assert by_length[600].outcome == "pass", by_length[600]
    cut = by_length[985]
    assert cut.outcome == "too_long" and cut.completion is None, cut
    prompt = cut.prompt_tokens
    assert prompt is not None and prompt + 64 > 1000 and prompt < 1000  # it fits alone, not with its budget
    assert cut.error == (
        f"prompt of {prompt} tokens + answer budget of 64 tokens is {prompt + 64 - 1000} tokens over the "
        "server's context length (1000 tokens); not sent"
    )
    sent = [request for request in server.seen() if not request["counting"]]
    assert len(sent) == 1  # only the 600-token case went out
    console = completed.stdout + completed.stderr
    assert "recall 100.0%" in console and "1 passed of 1 answered" in console and "too_long 1" in console
