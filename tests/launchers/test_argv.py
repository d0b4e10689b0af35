"""Pure argv/env builders: what each profile starts, without starting anything."""

from __future__ import annotations

import json
import os
import sys

import pytest

from launchers.argv import BF16_INDEX_K_ENV, BF16_PATCH_DIR, LaunchSpec
from launchers.argv.sglang import FP4_INDEXER_FLAG
from launchers.kinds import build_command
from launchers.profiles import apply_overrides, load_profiles
from recall_eval.errors import BadInput
from recall_eval.types import PDPart, Profile


@pytest.fixture
def profiles(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    return load_profiles()


def flag_value(argv: tuple[str, ...], flag: str) -> str:
    return argv[argv.index(flag) + 1]


def test_single_sglang_server(profiles):
    (spec,) = build_command(profiles["dsv4-flash"])
    assert spec.argv[:3] == (sys.executable, "-m", "sglang.launch_server")
    assert flag_value(spec.argv, "--model-path") == "deepseek-ai/DeepSeek-V4-Flash"
    assert flag_value(spec.argv, "--tp-size") == "4"
    assert json.loads(flag_value(spec.argv, "--json-model-override-args")) == {"index_topk": 512}
    assert (spec.role, spec.port, spec.is_endpoint, spec.env) == ("main", 30000, True, {})
    assert spec.log_name == "server-main.log"


def test_bf16_sets_the_patch_env_and_pythonpath(profiles):
    (spec,) = build_command(apply_overrides(profiles["dsv4-flash"], {"index_k_dtype": "bf16"}))
    assert spec.env == {BF16_INDEX_K_ENV: "1", "PYTHONPATH": str(BF16_PATCH_DIR)}
    assert BF16_PATCH_DIR.parts[-3:] == ("launchers", "sglang", "patch")
    merged = spec.merged_env({"PYTHONPATH": "/site", "HOME": "/root"})
    assert merged["PYTHONPATH"] == os.pathsep.join([str(BF16_PATCH_DIR), "/site"])
    assert merged["HOME"] == "/root"
    assert "PYTHONPATH=" in spec.command_line() and f"{BF16_INDEX_K_ENV}=1" in spec.command_line()


def test_fp4_uses_sglangs_fp4_indexer_flag(profiles):
    (spec,) = build_command(apply_overrides(profiles["dsv4-flash"], {"index_k_dtype": "fp4"}))
    assert FP4_INDEXER_FLAG in spec.argv and spec.env == {}


def test_pd_profile_gives_prefill_decode_router(profiles):
    specs = build_command(apply_overrides(profiles["dsv4-flash-pd"], {"index_k_dtype": "bf16"}))
    assert [spec.role for spec in specs] == ["prefill", "decode", "router"]
    prefill, decode, router = specs
    assert flag_value(prefill.argv, "--disaggregation-mode") == "prefill"
    assert flag_value(decode.argv, "--disaggregation-mode") == "decode"
    assert flag_value(decode.argv, "--base-gpu-id") == "4"
    assert prefill.extra_ports == (8998,)
    for server in (prefill, decode):  # bf16 on every server of the pair
        assert server.env[BF16_INDEX_K_ENV] == "1" and server.env["PYTHONPATH"] == str(BF16_PATCH_DIR)
    assert router.argv[:4] == (sys.executable, "-m", "sglang_router.launch_router", "--pd-disaggregation")
    assert router.argv[router.argv.index("--prefill") + 1 : router.argv.index("--prefill") + 3] == (
        "http://127.0.0.1:30100",
        "8998",
    )
    assert flag_value(router.argv, "--decode") == "http://127.0.0.1:30200"
    assert [spec.is_endpoint for spec in specs] == [False, False, True]


def test_pd_pair_disagreeing_on_precision_is_refused(profiles):
    base = profiles["dsv4-flash-pd"]
    parts = tuple(
        part.model_copy(update={"index_k_dtype": "bf16"}) if part.role == "decode" else part
        for part in base.pd
    )
    with pytest.raises(BadInput, match="disagree on index_k_dtype") as info:
        build_command(base.model_copy(update={"pd": parts}))
    assert "\n" not in str(info.value)
    env_parts = tuple(
        part.model_copy(update={"env": {BF16_INDEX_K_ENV: "1"}}) if part.role == "prefill" else part
        for part in base.pd
    )
    with pytest.raises(BadInput, match=BF16_INDEX_K_ENV):
        build_command(base.model_copy(update={"pd": env_parts}))


def test_extra_args_model_overrides_are_merged_into_one_flag(profiles):
    profile = profiles["dsv4-flash"].model_copy(
        update={"extra_args": ("--json-model-override-args", '{"rope_theta": 5}', "--log-level", "debug")}
    )
    (spec,) = build_command(profile)
    assert spec.argv.count("--json-model-override-args") == 1
    assert json.loads(flag_value(spec.argv, "--json-model-override-args")) == {
        "rope_theta": 5,
        "index_topk": 512,
    }
    assert spec.argv[-2:] == ("--log-level", "debug")
    clash = profile.model_copy(update={"extra_args": ("--json-model-override-args", '{"index_topk": 7}')})
    with pytest.raises(BadInput, match="keep one of them"):
        build_command(clash)


def test_reference_profile_and_its_refusals(profiles):
    (spec,) = build_command(
        apply_overrides(
            profiles["reference"],
            {"index_k_dtype": "bf16", "index_topk": 64, "memory_limit_gb": 2.5, "context_length": 4096},
        )
    )
    assert spec.argv[:3] == (sys.executable, "-m", "launchers.reference.server")
    assert flag_value(spec.argv, "--index-k-dtype") == "bf16"
    assert flag_value(spec.argv, "--memory-limit-gb") == "2.5"
    assert json.loads(flag_value(spec.argv, "--json-model-override-args")) == {"index_topk": 64}
    (fp4,) = build_command(apply_overrides(profiles["reference"], {"index_k_dtype": "fp4"}))
    assert flag_value(fp4.argv, "--index-k-dtype") == "fp4"  # SGLang's fp4 indexer format, embedded
    for overrides, message in [
        ({"tp": 2}, "tp must be 1"),
        ({"page_size": 64}, "page_size"),
    ]:
        with pytest.raises(BadInput, match=message):
            build_command(apply_overrides(profiles["reference"], overrides))
    with pytest.raises(BadInput, match="memory_limit_gb"):
        build_command(apply_overrides(profiles["dsv4-flash"], {"memory_limit_gb": 3.0}))


def test_env_contradicting_precision_is_refused(profiles):
    profile = profiles["dsv4-flash"].model_copy(update={"env": {BF16_INDEX_K_ENV: "1"}})
    with pytest.raises(BadInput, match="selects bf16"):
        build_command(profile)


def test_external_starts_nothing():
    assert build_command(Profile(name="x", engine="external", base_url="http://127.0.0.1:1")) == []


def test_command_line_quotes_for_a_shell():
    spec = LaunchSpec(role="main", name="main", argv=("python", "-c", "print('a b')"), env={"X": "a b"})
    assert spec.command_line() == "X='a b' python -c 'print('\"'\"'a b'\"'\"')'"
    assert spec.url == "http://127.0.0.1:30000"
    assert LaunchSpec(role="main", name="m", argv=(), host="::1", port=5).url == "http://[::1]:5"


def test_pd_part_names_are_unique_with_two_prefills(profiles):
    base = profiles["dsv4-flash-pd"]
    parts = (PDPart(role="prefill", port=1, bootstrap_port=2), *base.pd)
    specs = build_command(base.model_copy(update={"pd": parts}))
    assert [spec.name for spec in specs] == ["prefill-1", "prefill-2", "decode", "router"]
    router = specs[-1]
    assert router.argv.count("--prefill") == 2
