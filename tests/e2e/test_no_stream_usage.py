"""A server that streams no usage (llama-cpp-python, llama.cpp): lengths come from its tokenizer
endpoint, completion tokens from tokenizing each answer, and the run says which source each number came
from. Through tests/e2e/real_world_server.py with --extras-tokenize --no-stream-usage --chatty: the
shape of llama-cpp-python's server (POST /extras/tokenize {"input": text}, BOS included, no
chat-template endpoint; usage only in non-streamed answers); one token per word, 2 per message.

Proves: lengths are measured with server:/extras/tokenize (exact: every server-counted length within
tolerance, never flagged off target), with no usage-based calibration (at most the two counting requests
that learn the chat template); each result's server_prompt_tokens is that count (source named);
completion tokens are 8 (the answer's words, source `tokenized`), not 1 (the one chunk it streamed);
run.json's adaptations say it once."""

from __future__ import annotations

from recall_eval.calibration import tolerance
from recall_eval.frame import results_frame
from recall_eval.tokenization import EXTRAS_TOKENIZER_NAME
from tests.e2e.test_real_world_servers import all_pass, served, sweep  # noqa: F401 (served: the fixture)


def test_lengths_and_answer_tokens_from_the_tokenizer_endpoint(served, tmp_path):  # noqa: F811
    server = served("--extras-tokenize", "--no-stream-usage", "--chatty")
    completed, run, results, run_dir = sweep(
        tmp_path / "out", "--base-url", server.url,
        grid=["--lengths", "300,900", "--depths", "0,50,100", "--trials", "1"],
    )  # fmt: skip
    assert completed.returncode == 0, completed.stderr
    assert all_pass(results), [(r.outcome, r.error) for r in results]
    assert run.length_measure == EXTRAS_TOKENIZER_NAME and run.estimated_length_suites == ()
    counting = [request for request in server.seen() if request["counting"]]
    assert len(counting) <= 2, len(counting)  # the chat template, learned once: no usage calibration
    for result in results:
        assert result.completion is not None and result.completion.prompt_tokens is None  # no usage streamed
        assert result.server_prompt_tokens == result.prompt_tokens
        assert result.server_prompt_tokens_source == EXTRAS_TOKENIZER_NAME
        assert (
            abs(result.length_error_tokens) <= tolerance(result.target_tokens)
            and not result.length_off_target
        )
        assert result.completion.completion_tokens == 8, result.completion
        assert result.completion.completion_tokens_source == "tokenized"
    assert "token_counts" in run.adaptations and "tokenizer" in run.adaptations["token_counts"]
    frame = results_frame(run_dir)
    assert set(frame["completion_tokens_source"]) == {"tokenized"}
    assert set(frame["server_prompt_tokens_source"]) == {EXTRAS_TOKENIZER_NAME}
