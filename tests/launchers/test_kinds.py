"""Server kinds: one registry decides everything that differs between engines (launchers/kinds), and
the vLLM kind's argv (index_topk through --hf-overrides, KV-cache dtype, TP/DP, max model length,
its interpreter) with its refusals."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import get_args

import pytest

from launchers.argv.vllm import VLLM_SERVER_MODULE
from launchers.kinds import KINDS, build_command, kind_of
from launchers.kinds.base import COMMON_FIELDS
from launchers.kinds.vllm import interpreter_of, serve_args, vllm_refusals
from launchers.profiles import apply_overrides, load_profiles
from recall_eval.engines import ENGINES
from recall_eval.errors import BadInput
from recall_eval.types import Engine, Profile

ROOT = Path(__file__).resolve().parents[2]
# a test of an engine by its name: profile.engine == "x", engine != 'x', engine in ("x", ...)
ENGINE_TEST = re.compile(r"""engine["'\]]*\s*(==|!=|\bin\b|\bnot in\b)\s*[("'\[]""")


def flag_value(argv: tuple[str, ...], flag: str) -> str:
    return argv[argv.index(flag) + 1]


def test_registry_and_core_facts_name_the_same_engines():
    """A kind added to one registry and not the other (or to neither Engine) fails here."""
    assert set(KINDS) == set(ENGINES) == set(get_args(Engine))
    assert all(kind.name == name for name, kind in KINDS.items())
    assert [name for name, facts in ENGINES.items() if not facts.launched] == ["external"]


def test_no_engine_is_tested_by_name_outside_the_registry():
    """The issue's grep, as a test: an `engine ==` (or !=, in) string test outside launchers/kinds fails."""
    offenders = []
    for folder in ("recall_eval", "launchers", "reports", "suites"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            if "kinds" in path.relative_to(ROOT).parts:
                continue
            for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
                if ENGINE_TEST.search(line):
                    offenders.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    assert offenders == []
    assert ENGINE_TEST.search('if profile.engine == "sglang":')  # the pattern itself finds one
    assert ENGINE_TEST.search("if target['engine'] != 'external':")


def test_a_kind_refuses_fields_it_does_not_take():
    profiles = load_profiles()
    with pytest.raises(BadInput, match=r"engine vllm does not take dsa_decode_backend, page_size") as info:
        apply_overrides(profiles["dsv32-vllm"], {"page_size": 64, "dsa_decode_backend": "flashmla_kv"})
    assert "\n" not in str(info.value)
    with pytest.raises(BadInput, match="engine sglang does not take kv_cache_dtype"):
        apply_overrides(profiles["dsv32"], {"kv_cache_dtype": "fp8"})
    with pytest.raises(BadInput, match="engine reference does not take executable"):
        apply_overrides(profiles["reference"], {"executable": "/usr/bin/python3"})


def test_each_kind_declares_its_fields_once_in_a_typed_model(tmp_path):
    """A kind's profile fields are its own typed model (a base of Profile): every Profile field is
    declared by ServerFields or by some kind's model, with one type and default; a typo in a profile
    file is answered with the fields its engine takes, not every engine's."""
    declared = set(COMMON_FIELDS)
    for kind in KINDS.values():
        assert issubclass(Profile, kind.fields_model)
        assert not kind.fields & COMMON_FIELDS
        declared |= kind.fields
        for name in kind.fields:  # the kind's model and the stored Profile agree on each field
            assert kind.fields_model.model_fields[name].annotation == Profile.model_fields[name].annotation
    assert declared == set(Profile.model_fields)
    assert "page_size" in KINDS["sglang"].fields and "page_size" not in KINDS["vllm"].fields
    assert "executable" in KINDS["vllm"].fields
    assert KINDS["external"].fields == {"base_url", "replica_base_urls"}
    typo = tmp_path / "typo.toml"
    typo.write_text("[profiles.v]\nengine = 'vllm'\nmodel_path = '/m'\nkv_cache_dtyp = 'fp8'\n")
    with pytest.raises(BadInput, match=r"unknown field\(s\) kv_cache_dtyp; engine vllm takes: ") as info:
        load_profiles(typo)
    line = str(info.value)
    assert "kv_cache_dtype" in line and "executable" in line
    assert "page_size" not in line and "fault" not in line


def test_vllm_refuses_index_key_precisions_it_has_no_flag_for():
    """No bf16 (or fp4) index-key flag upstream: a one-line refusal that says so, not a silent fp8 run."""
    profiles = load_profiles()
    for dtype in ("bf16", "fp4"):
        with pytest.raises(BadInput) as info:
            apply_overrides(profiles["dsv32-vllm"], {"index_k_dtype": dtype})
        line = str(info.value)
        assert f"cannot launch index_k_dtype {dtype}" in line and "no flag" in line and "\n" not in line
    assert KINDS["vllm"].index_k_dtypes == ("fp8",)


def test_vllm_argv_carries_every_setting():
    profiles = load_profiles()
    profile = apply_overrides(
        profiles["dsv32-vllm"],
        {"index_topk": 1024, "context_length": 65536, "port": 31001, "served_model_name": "v32"},
    )
    (spec,) = build_command(profile)
    assert spec.argv[:3] == ("vllm", "serve", "deepseek-ai/DeepSeek-V3.2")
    assert json.loads(flag_value(spec.argv, "--hf-overrides")) == {"index_topk": 1024}
    assert flag_value(spec.argv, "--kv-cache-dtype") == "fp8"
    assert flag_value(spec.argv, "--tensor-parallel-size") == "8"
    assert flag_value(spec.argv, "--max-model-len") == "65536"
    assert flag_value(spec.argv, "--gpu-memory-utilization") == "0.9"
    assert flag_value(spec.argv, "--port") == "31001" and spec.url == "http://127.0.0.1:31001"
    assert kind_of(profile).expected_model(profile) == "v32"
    (dp,) = build_command(profiles["dsv32-vllm-dp"])
    assert flag_value(dp.argv, "--data-parallel-size") == "8" and "--tensor-parallel-size" not in dp.argv
    assert dp.argv[-1] == "--enable-expert-parallel"


def test_vllm_hf_overrides_in_extra_args_are_merged_once():
    base = Profile(name="v", engine="vllm", model_path="/m", index_topk=512)
    (spec,) = build_command(base.model_copy(update={"extra_args": ("--hf-overrides", '{"rope_theta": 1}')}))
    assert spec.argv.count("--hf-overrides") == 1
    assert json.loads(flag_value(spec.argv, "--hf-overrides")) == {"rope_theta": 1, "index_topk": 512}
    with pytest.raises(BadInput, match="keep one of them"):
        build_command(base.model_copy(update={"extra_args": ('--hf-overrides={"index_topk": 64}',)}))
    with pytest.raises(BadInput, match="needs model_path"):
        build_command(Profile(name="v", engine="vllm"))


def test_vllm_from_its_interpreter(tmp_path):
    """The profile may name vLLM's Python rather than its program; the parser runs in that Python."""
    (spec,) = build_command(Profile(name="v", engine="vllm", model_path="/m", executable="/venv/bin/python3"))
    assert spec.argv[:5] == ("/venv/bin/python3", "-m", VLLM_SERVER_MODULE, "--model", "/m")
    script = tmp_path / "bin" / "vllm"
    script.parent.mkdir()
    script.write_text("#!/opt/some-venv/bin/python3.11\nimport sys\n")
    script.chmod(0o755)
    assert interpreter_of(str(script)) == "/opt/some-venv/bin/python3.11"
    assert interpreter_of(str(tmp_path / "nowhere" / "vllm")) is None


def test_plan_knows_which_memory_models_it_holds():
    profiles = load_profiles()
    assert KINDS["sglang"].plan_refusal(profiles["dsv32"]) is None
    line = KINDS["vllm"].plan_refusal(profiles["dsv32-vllm"])
    assert line is not None and "gpu_memory_utilization" in line and "\n" not in line


@pytest.mark.vllm
def test_vllm_argv_parsed_by_vllms_own_parser():
    """Every shipped vLLM profile's argv, as its program and as its interpreter, with overrides,
    accepted by vLLM 0.32's own `serve` parser and validation; a flag vLLM lacks and a KV-cache
    dtype it does not know refused in vLLM's words (one import of vLLM for all of them)."""
    from tests.prerequisites import vllm_executable

    python = interpreter_of(vllm_executable())
    assert python is not None
    profiles = load_profiles()
    good = []
    for name in ("dsv32-vllm", "dsv32-vllm-dp"):
        for executable in ("vllm", python):
            profile = apply_overrides(
                profiles[name], {"executable": executable, "index_topk": 1024, "context_length": 8192}
            )
            good.append(serve_args(build_command(profile)[0]))
    base = apply_overrides(profiles["dsv32-vllm"], {"executable": python})
    bad = [
        serve_args(build_command(base.model_copy(update={"extra_args": ("--no-such-flag",)}))[0]),
        serve_args(build_command(base.model_copy(update={"kv_cache_dtype": "int3"}))[0]),
    ]
    refusals = vllm_refusals(python, tuple(good + bad))
    assert refusals[: len(good)] == (None,) * len(good)
    assert refusals[-2] is not None and "unrecognized arguments: --no-such-flag" in refusals[-2]
    assert refusals[-1] is not None and "--kv-cache-dtype: invalid choice: 'int3'" in refusals[-1]


def test_plan_and_compare_of_a_vllm_profile_refuse_in_one_line():
    """The CLI, as a user runs it: `plan` of a vLLM profile and `compare fp8 bf16` on one, exit 2, one
    line each, nothing started."""
    from tests.e2e.cli import error_lines, run_cli

    plan = run_cli("plan", "dsv32-vllm")
    assert plan.returncode == 2, plan.stderr
    (line,) = error_lines(plan)
    assert "engine vllm" in line and "gpu_memory_utilization" in line
    compare = run_cli("compare", "fp8", "bf16", "--profile", "dsv32-vllm", "--lengths", "338")
    assert compare.returncode == 2, compare.stderr
    (line,) = error_lines(compare)
    assert "cannot launch index_k_dtype bf16" in line and "no flag" in line


def test_vllm_preflight_names_a_missing_vllm(tmp_path):
    """A profile whose executable is not there: one preflight line naming it and how to install vLLM."""
    from launchers.preflight import preflight

    missing = str(tmp_path / "venv" / "bin" / "vllm")
    profile = Profile(name="v", engine="vllm", model_path="org/model", executable=missing, port=0)
    failures = preflight(profile.model_copy(update={"port": 39999}))
    assert failures == [
        f"{missing} not found (the profile's executable names vLLM's program); install vLLM in its own venv "
        "(python3 -m venv V && V/bin/pip install vllm) and set executable"
    ]


def test_vllm_log_lines_are_masked_by_its_kind(tmp_path):
    """vLLM 0.32 logs its arguments as a dict (`'api_key': ['KEY']`): the vllm kind's secrets of its
    argv mask that line as the log is written."""
    import os

    from launchers.log_mask import MaskedLog
    from recall_eval.redact import MASK

    key = "sk-vllm-key-5e1b"
    profile = Profile(name="v", engine="vllm", model_path="/m", extra_args=("--api-key", key))
    (spec,) = build_command(profile)
    secrets = kind_of(profile).log_secrets(spec.argv, spec.merged_env({"HF_TOKEN": "hf_tokenvalue"}))
    assert secrets == sorted([key, "hf_tokenvalue"])
    log_path = tmp_path / "server-main.log"
    read_end, write_end = os.pipe()
    masked = MaskedLog(read_end, log_path, secrets)
    line = f"(APIServer pid=1) INFO [api_utils.py:286] non-default args: {{'model': '/m', 'api_key': ['{key}']}}\n"
    os.write(write_end, line.encode())
    os.close(write_end)
    masked.wait()
    text = log_path.read_text()
    assert key not in text and MASK in text and "non-default args" in text


@pytest.mark.vllm
def test_vllm_multi_node_rank_argv_parsed_by_vllms_own_parser():
    """The argv each node of a two-node vLLM server starts (--nnodes, --node-rank, --master-addr/-port,
    --headless on rank 1: launchers/ray_cluster) is accepted by vLLM 0.32's own `serve` parser."""
    from tests.prerequisites import vllm_executable

    python = interpreter_of(vllm_executable())
    assert python is not None
    profile = apply_overrides(load_profiles()["dsv32-vllm"], {"executable": python, "tp": 16})
    argvs = tuple(
        serve_args(spec)
        for rank in (0, 1)
        for spec in KINDS["vllm"].rank_specs(profile, 2, rank, "10.0.0.1:29500")
    )
    assert vllm_refusals(python, argvs) == (None, None)
