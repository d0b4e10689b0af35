"""Masking by name and by value, and the /server_info allow-list (the e2e test is tests/e2e/test_secrets.py)."""

from __future__ import annotations

import pytest

from launchers.argv.spec import LaunchSpec
from recall_eval.redact import MASK, Redactor, allowed_server_info, is_secret_name


@pytest.mark.parametrize(
    "name",
    ["api_key", "admin_api_key", "HF_TOKEN", "OPENAI_API_KEY", "apiKey", "--api-key", "DB_PASSWORD",
     "authorization", "client_secret", "AWS_SECRET_ACCESS_KEY"],
)  # fmt: skip
def test_secret_names(name):
    assert is_secret_name(name)


@pytest.mark.parametrize(
    "name",
    ["max_total_tokens", "kv_bytes_per_token", "tokenizer_path", "index_topk", "skip_tokenizer_init",
     "context_length", "ssl_keyfile", "num_tokens"],
)  # fmt: skip
def test_harmless_names(name):
    assert not is_secret_name(name)


def test_text_masks_patterns_and_known_values():
    redactor = Redactor(["run-secret-xyz"])
    text = (
        "server_args=ServerArgs(api_key='a1', port=3) HF_TOKEN=b2 --api-key c3 --admin-api-key=d4 "
        '{"api_key": "e5"} Authorization: Bearer f6 echoed run-secret-xyz max_total_tokens=100'
    )
    masked = redactor.text(text)
    for secret in ("a1", "b2", "c3", "d4", "e5", "f6", "run-secret-xyz"):
        assert f"{secret}" not in masked.replace("max_total_tokens=100", ""), (secret, masked)
    assert "max_total_tokens=100" in masked and "port=3" in masked


def test_credentials_in_urls_are_masked():
    masked = Redactor().text("proxy https://alice:s3cret@llm.example.com/v1?api_key=q9 ok")
    assert "s3cret" not in masked and "alice" not in masked and "q9" not in masked
    assert "llm.example.com/v1" in masked


def test_argv_masks_the_value_after_a_secret_flag():
    argv = ["serve", "--api-key", "k1", "--port", "30000", "--hf-token=k2", "--model", "m"]
    assert Redactor().argv(argv) == [
        "serve",
        "--api-key",
        MASK,
        "--port",
        "30000",
        f"--hf-token={MASK}",
        "--model",
        "m",
    ]


def test_value_masks_nested_mappings_and_arg_tuples():
    data = {"env": {"HF_TOKEN": "x", "CUDA_VISIBLE_DEVICES": "0"}, "extra_args": ("--api-key", "y"), "tp": 4}
    assert Redactor().value(data) == {
        "env": {"HF_TOKEN": MASK, "CUDA_VISIBLE_DEVICES": "0"},
        "extra_args": ("--api-key", MASK),
        "tp": 4,
    }


def test_answers_keep_key_like_text_but_not_the_run_secret():
    redactor = Redactor(["run-secret-xyz"])
    assert redactor.values_only("key=ZEBRA-1 run-secret-xyz") == f"key=ZEBRA-1 {MASK}"


def test_server_info_allow_list_keeps_what_reports_read():
    info = {
        "server_info": {
            "api_key": "k",
            "launch_command": "python -m sglang.launch_server --api-key k",
            "max_total_num_tokens": 1000,
            "kv_bytes_per_token": 132,
            "index_topk": 512,
            "internal_states": [{"admin_api_key": "k", "max_total_num_tokens": 1000}],
        },
        "models": {"data": [{"id": "m", "root": "/secret/path"}]},
        "model": "m",
        "max_model_len": 4096,
    }
    assert allowed_server_info(info) == {
        "server_info": {
            "max_total_num_tokens": 1000,
            "kv_bytes_per_token": 132,
            "index_topk": 512,
            "internal_states": [{"max_total_num_tokens": 1000}],
        },
        "model": "m",
        "max_model_len": 4096,
    }


def test_launch_command_line_is_masked():
    spec = LaunchSpec(
        name="main", role="main", argv=["python", "-m", "sglang.launch_server", "--api-key", "k9"],
        env={"HF_TOKEN": "t9", "CUDA_VISIBLE_DEVICES": "0"}, host="127.0.0.1", port=30000,
    )  # fmt: skip
    line = spec.command_line()
    assert "k9" not in line and "t9" not in line and "CUDA_VISIBLE_DEVICES=0" in line


@pytest.mark.parametrize(
    "prose",
    [
        "does not fit: the smallest needle prompt takes 900 tokens with no filler, over the 1000-token target",
        "a 32-token answer budget (--max-tokens 64 raises it)",
        "the api-key header was sent; the secret-key store is empty",
        "first token: 3.2 s, key: 12",
        "prompt-token count 4096 over the max-token limit 4000",
    ],
)
def test_prose_is_never_masked(prose):
    """Words joined by hyphens ("1000-token target") are prose, not `-token VALUE` flags; a colon before
    a number is a measurement. Before the fix the first became "1000-token ***" in results.jsonl."""
    assert Redactor(["run-secret-xyz"]).text(prose) == prose
