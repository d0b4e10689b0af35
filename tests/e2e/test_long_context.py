"""Cases longer than the reference weights' default context (32,768 tokens) through the real CLI.

The engine has no position limit of its own (RoPE only in the sliding-window layers, computed in float64;
the DSA layers and the compressor are position-free); what bounds a case is the context length the
server is started with, which also sizes its KV pool. Without --context-length a 40,000-token case is
too_long (never sent); with --context-length 40960 it is sent, prefilled and answered. (131,072 tokens:
tests/benchmarks/bench_long_context.py, minutes on two cores, not a test.)
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.e2e.test_compare_base_url import recall_eval

pytestmark = [pytest.mark.slow]

GRID = ["--lengths", "40000", "--depths", "50", "--trials", "1", "--max-tokens", "32"]


def _only_result(stdout: str) -> dict:
    run_dir = Path(stdout.strip().splitlines()[-1]).parent
    (line,) = (run_dir / "results.jsonl").read_text().splitlines()
    return json.loads(line)


def test_a_case_past_the_default_context_is_answered_with_context_length() -> None:
    """Fails if a long case is refused, times out or dies once the server is started long enough,
    or if the default context stops bounding it (then it would not be too_long)."""
    short = recall_eval("sweep", *GRID, timeout=600)
    assert short.returncode == 3, short.stderr[-2000:]  # nothing measured: the one case is too long
    assert _only_result(short.stdout)["outcome"] == "too_long"
    done = recall_eval("sweep", *GRID, "--context-length", "40960", timeout=1500)
    assert done.returncode == 0, done.stderr[-3000:]
    result = _only_result(done.stdout)
    assert result["outcome"] in ("pass", "miss"), result
    assert 39_900 <= result["server_prompt_tokens"] <= 40_000
