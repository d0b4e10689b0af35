"""Profiles: shipped TOML files, the user's file, inheritance, overrides, one-line errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from launchers.profiles import apply_overrides, load_profiles, resolve_profile
from recall_eval.errors import BadInput

SHIPPED = {"reference", "dsv4-flash", "dsv4-flash-pd", "dsv32"}


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def test_shipped_profiles_load_with_their_engines(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)  # no ./recall-eval.toml here
    profiles = load_profiles()
    assert SHIPPED <= set(profiles)
    assert profiles["reference"].engine == "reference"
    assert profiles["dsv4-flash"].engine == "sglang"
    assert profiles["dsv4-flash"].model_path == "deepseek-ai/DeepSeek-V4-Flash"
    assert profiles["dsv32"].index_topk == 2048
    roles = [part.role for part in profiles["dsv4-flash-pd"].pd]
    assert roles == ["prefill", "decode", "router"]


def test_user_file_in_cwd_overrides_and_extends(monkeypatch, tmp_path):
    write(
        tmp_path / "recall-eval.toml",
        """
[profiles.reference]
engine = "reference"
port = 31234

[profiles.mine]
base = "dsv4-flash"
index_topk = 1024
env = { A = "1" }
""",
    )
    monkeypatch.chdir(tmp_path)
    profiles = load_profiles()
    assert profiles["reference"].port == 31234
    assert profiles["reference"].ready_timeout_s == 900.0  # replaced, not merged with the shipped entry
    mine = profiles["mine"]
    assert (mine.engine, mine.tp, mine.index_topk, mine.env) == ("sglang", 4, 1024, {"A": "1"})
    assert mine.description is None  # descriptions are not inherited


def test_explicit_profiles_file_and_missing_one(tmp_path):
    path = write(
        tmp_path / "p.toml", '[profiles.ext]\nengine = "external"\nbase_url = "http://127.0.0.1:9"\n'
    )
    assert load_profiles(path)["ext"].base_url == "http://127.0.0.1:9"
    with pytest.raises(BadInput, match="does not exist"):
        load_profiles(tmp_path / "nope.toml")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[profiles.x]\nengine = 'nope'\n", "engine"),
        ("[profiles.x]\nengine = 'sglang'\ncolour = 'red'\n", "colour"),
        ("[profiles.x]\nengine = 'external'\n", "needs base_url"),
        ("[profiles.x]\nbase = 'y'\n[profiles.y]\nbase = 'x'\n", "loops"),
        ("[profiles.x]\nbase = 'missing'\n", "not a known profile"),
        ("[profiles.x\n", "not valid TOML"),
        ("[other]\na = 1\n", "unknown top-level"),
        (
            "[profiles.x]\nengine = 'sglang'\n[[profiles.x.pd]]\nrole = 'prefill'\nport = 1\n",
            "exactly one router",
        ),
    ],
)
def test_bad_user_files_give_one_line_errors(tmp_path, text, message):
    path = write(tmp_path / "bad.toml", text)
    with pytest.raises(BadInput, match=message) as info:
        load_profiles(path)
    assert "\n" not in str(info.value)


def test_resolve_unknown_profile_lists_known(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(BadInput) as info:
        resolve_profile("dsv5", {})
    for name in SHIPPED:
        assert name in str(info.value)


def test_overrides_compose_and_none_means_not_given(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    profile = resolve_profile(
        "dsv4-flash",
        {"index_k_dtype": "bf16", "index_topk": 1024, "mem_fraction_static": 0.8, "tp": None, "port": 31000},
    )
    assert (profile.index_k_dtype, profile.index_topk, profile.mem_fraction_static) == ("bf16", 1024, 0.8)
    assert (profile.tp, profile.port) == (4, 31000)


def test_override_errors(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(BadInput, match="unknown profile override"):
        resolve_profile("dsv4-flash", {"colour": "red"})
    with pytest.raises(BadInput, match="index_k_dtype"):
        resolve_profile("dsv4-flash", {"index_k_dtype": "int3"})
    with pytest.raises(BadInput, match="mem_fraction_static"):
        resolve_profile("dsv4-flash", {"mem_fraction_static": 1.5})


def test_pd_overrides_reach_every_part(tmp_path):
    path = write(
        tmp_path / "pd.toml",
        """
[profiles.pd]
base = "dsv4-flash-pd"
[[profiles.pd.pd]]
role = "prefill"
port = 30100
index_k_dtype = "bf16"
[[profiles.pd.pd]]
role = "decode"
port = 30200
base_gpu_id = 4
[[profiles.pd.pd]]
role = "router"
port = 30000
""",
    )
    profile = load_profiles(path)["pd"]
    assert profile.pd[0].index_k_dtype == "bf16"
    fixed = apply_overrides(profile, {"index_k_dtype": "fp8", "port": 31999})
    assert [part.index_k_dtype for part in fixed.pd] == [None, None, None]
    assert [part.port for part in fixed.pd] == [30100, 30200, 31999]
