"""Unit tests of the reference server's pure parts: flags, SGLang's length rules, response shapes,
indexer top-k packing, stop strings, and the real memory cap (in a child process)."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from launchers.reference import http_api as api
from launchers.reference.indexer_capture import decode_indexer_topk, encode_indexer_topk, indexer_topk_array
from launchers.reference.memory_limit import data_segment_bytes, is_allocation_failure
from launchers.reference.request_limits import ContextLengthExceeded, RequestLimits
from launchers.reference.server_args import parse_server_args, resolve_index_k_dtype, token_count
from launchers.reference.text_stream import StopMatcher

# ----- flags -----


def test_defaults_mirror_sglang() -> None:
    args = parse_server_args([], {})
    assert (args.host, args.port, args.log_level) == ("127.0.0.1", 30000, "info")
    assert args.index_k_dtype == "fp8" and args.index_k_dtype_source == "default"
    assert args.index_topk is None and not args.enable_return_indexer_topk


def test_sglang_flags_parse() -> None:
    args = parse_server_args(
        [
            "--port", "31001", "--context-length", "32k", "--max-total-tokens", "64Ki",
            "--json-model-override-args", '{"index_topk": 1024}', "--enable-return-indexer-topk",
            "--mem-fraction-static", "0.8", "--served-model-name", "ref", "--memory-limit-gb", "1.5",
        ],
        {},
    )  # fmt: skip
    assert args.port == 31001 and args.context_length == 32000 and args.max_total_tokens == 65536
    assert args.index_topk == 1024 and args.enable_return_indexer_topk
    assert args.mem_fraction_static == 0.8 and args.served_model_name == "ref" and args.memory_limit_gb == 1.5


@pytest.mark.parametrize(
    "argv",
    [
        ["--tp", "2"],  # an SGLang flag the reference engine does not have
        ["--json-model-override-args", '{"num_hidden_layers": 2}'],
        ["--json-model-override-args", "{not json"],
        ["--json-model-override-args", '{"index_topk": 0}'],
        ["--index-k-dtype", "fp16"],
        ["--context-length", "-5"],
        ["--memory-limit-gb", "0"],
    ],
)
def test_bad_flags_exit_2(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        parse_server_args(argv, {})
    assert exc.value.code == 2
    assert "error:" in capsys.readouterr().err


def test_index_k_dtype_precedence() -> None:
    env = {"SGLANG_DSV4_BF16_INDEX_K": "1"}
    assert resolve_index_k_dtype(None, env) == ("bf16", "env SGLANG_DSV4_BF16_INDEX_K=1")
    assert resolve_index_k_dtype("bf16", env)[0] == "bf16"
    assert resolve_index_k_dtype("bf16", {})[0] == "bf16"
    assert resolve_index_k_dtype(None, {"SGLANG_DSV4_BF16_INDEX_K": "0"}) == ("fp8", "default")
    assert resolve_index_k_dtype("fp4", {}) == ("fp4", "flag")
    for flag in ("fp8", "fp4"):
        with pytest.raises(ValueError, match="contradicts"):
            resolve_index_k_dtype(flag, env)


def test_token_count_suffixes() -> None:
    assert token_count("4096") == 4096 and token_count("25.6k") == 25600 and token_count("2Ki") == 2048


# ----- SGLang's length rules -----


def test_prompt_reaching_context_is_refused_with_sglang_text() -> None:
    limits = RequestLimits(context_len=1000, max_total_num_tokens=5000)
    with pytest.raises(ContextLengthExceeded) as exc:
        limits.check_context(1000, None)
    assert str(exc.value) == (
        "The input (1000 tokens) is longer than the model's context length (1000 tokens)."
    )
    limits.check_context(999, None)
    limits.check_context(990, 10)
    with pytest.raises(ContextLengthExceeded, match="You requested a total of 1001 tokens: 990 tokens"):
        limits.check_context(990, 11)


def test_scheduler_limits_follow_pool_and_context() -> None:
    limits = RequestLimits(context_len=1000, max_total_num_tokens=500)
    assert limits.max_req_len == 499 and limits.max_req_input_len == 494
    assert limits.scheduler_abort(493) is None
    message = limits.scheduler_abort(494)
    assert message is not None and message.startswith(
        "Input length (494 tokens) exceeds the maximum allowed length"
    )
    assert limits.clip_max_new_tokens(400, None) == 98
    assert limits.clip_max_new_tokens(400, 16) == 16


# ----- response shapes -----


def test_chat_chunk_framing() -> None:
    frame = api.chat_chunk("abc", 7, "m", role="assistant", content="")
    assert frame.startswith("data: ") and frame.endswith("\n\n") and "\n" not in frame[:-2]
    payload = json.loads(frame[len("data: ") :])
    assert payload["choices"][0]["delta"] == {"reasoning_content": None, "role": "assistant", "content": ""}
    assert "usage" not in payload
    usage = json.loads(api.chat_usage_chunk("abc", 7, "m", api.usage_info(5, 3))[6:])
    assert usage["choices"] == [] and usage["usage"]["total_tokens"] == 8


def test_finish_reason_json() -> None:
    assert api.finish_reason_json("length", None, 4) == {"type": "length", "length": 4}
    assert api.finish_reason_json("stop", 2, 4) == {"type": "stop", "matched": 2}


# ----- indexer top-k -----


def test_indexer_topk_layout_and_roundtrip() -> None:
    prompt, layers, k = 10, 3, 4
    steps = [np.arange(layers * k, dtype=np.int32).reshape(layers, k) + 100 * i for i in range(3)]
    steps[2] = steps[2][:, :2]  # fewer blocks than k: padded with -1
    array = indexer_topk_array(prompt, steps, layers, k)
    assert array.shape == (prompt + 3 - 1, layers, k)
    assert (array[: prompt - 1] == -1).all()
    assert (array[prompt - 1] == steps[0]).all() and (array[prompt] == steps[1]).all()
    assert (array[prompt + 1, :, :2] == steps[2]).all() and (array[prompt + 1, :, 2:] == -1).all()
    decoded = decode_indexer_topk(encode_indexer_topk(array), layers, k)
    assert decoded.dtype == np.int32 and (decoded == array).all()


# ----- stop strings -----


def test_stop_string_is_never_streamed() -> None:
    matcher = StopMatcher(("</ans>",))
    released = [matcher.feed(piece, final=False) for piece in ["The key is 4", "2</a", "ns> tail"]]
    assert "".join(text for text, _ in released) == "The key is 42"
    assert released[-1][1] == "</ans>" and matcher.text == "The key is 42"


def test_no_stop_releases_everything_at_the_end() -> None:
    matcher = StopMatcher(("STOP",))
    first, _ = matcher.feed("abcdef", final=False)
    last, matched = matcher.feed("gh", final=True)
    assert first == "abc" and first + last == "abcdefgh" and matched is None


# ----- the memory cap is real -----


def test_memory_cap_makes_torch_allocation_fail_cleanly() -> None:
    script = (
        "import torch\n"
        "from launchers.reference.memory_limit import cap_data_memory, is_allocation_failure\n"
        "in_use = cap_data_memory(0)\n"
    )
    broken = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert broken.returncode != 0 and "below the" in broken.stderr
    script = (
        "import torch\n"
        "from launchers.reference.memory_limit import cap_data_memory, data_segment_bytes, is_allocation_failure\n"
        "cap_data_memory(data_segment_bytes() + 200 * 2**20)\n"
        "small = torch.ones(20 * 2**20, dtype=torch.uint8)\n"
        "try:\n"
        "    torch.ones(400 * 2**20, dtype=torch.uint8)\n"
        "except Exception as exc:\n"
        "    print('failed', is_allocation_failure(exc))\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "failed True"


def test_allocation_failure_recognition() -> None:
    assert is_allocation_failure(MemoryError())
    assert is_allocation_failure(RuntimeError("DefaultCPUAllocator: can't allocate memory: you tried ..."))
    assert not is_allocation_failure(RuntimeError("shape mismatch"))
    assert data_segment_bytes() > 0
