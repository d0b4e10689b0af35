"""--capture-indexer wiring: the profile asks the launcher for --enable-return-indexer-topk (SGLang and the
reference engine), SGLang gets unfused DSA top-k and attention TP size 1, PD profiles are refused."""

from __future__ import annotations

import importlib.metadata

import pytest

from launchers.kinds import build_command
from launchers.profiles import apply_overrides, load_profiles
from launchers.reference.server_args import parse_server_args
from recall_eval.api.sweeping import with_capture
from recall_eval.errors import BadInput
from recall_eval.types import Profile


def _profiles() -> dict[str, Profile]:
    return load_profiles()


def test_with_capture_turns_the_server_flag_on_for_launched_profiles_only():
    reference = _profiles()["reference"]
    assert with_capture(reference, True).enable_return_indexer_topk
    assert with_capture(reference, False) == reference
    external = Profile(name="external", engine="external", base_url="http://127.0.0.1:1")
    assert with_capture(external, True) == external


def test_pd_profiles_are_refused():
    with pytest.raises(BadInput, match="PD-disaggregated"):
        with_capture(_profiles()["dsv4-flash-pd"], True)


def test_reference_argv_carries_the_flag_and_its_parser_takes_it():
    [spec] = build_command(with_capture(apply_overrides(_profiles()["reference"], {"index_topk": 8}), True))
    assert "--enable-return-indexer-topk" in spec.argv
    args = parse_server_args(list(spec.argv[3:]), {})
    assert args.enable_return_indexer_topk and args.index_topk == 8
    [plain] = build_command(_profiles()["reference"])
    assert "--enable-return-indexer-topk" not in plain.argv


def test_sglang_argv_unfuses_dsa_topk_and_makes_attention_tp_one():
    dsv32 = _profiles()["dsv32"]  # tp 8
    [spec] = build_command(with_capture(dsv32, True))
    assert "--enable-return-indexer-topk" in spec.argv
    assert spec.env["SGLANG_DSA_FUSE_TOPK"] == "0"
    flags = list(spec.argv)
    assert flags[flags.index("--attn-dp-size") + 1] == "8"
    [plain] = build_command(dsv32)
    assert "SGLANG_DSA_FUSE_TOPK" not in plain.env and "--attn-dp-size" not in plain.argv
    chosen = apply_overrides(dsv32, {"env": {"SGLANG_DSA_FUSE_TOPK": "1"}, "tp": 1})
    [own] = build_command(with_capture(chosen, True))
    assert own.env["SGLANG_DSA_FUSE_TOPK"] == "1"  # the profile's own choice stands
    assert "--attn-dp-size" not in own.argv


@pytest.mark.sglang
def test_sglang_parses_the_capture_argv():
    assert importlib.metadata.version("sglang") == "0.5.23"
    from sglang.srt.server_args import prepare_server_args

    [spec] = build_command(with_capture(_profiles()["dsv4-flash"], True))
    args = prepare_server_args(list(spec.argv[3:]))
    assert args.enable_return_indexer_topk is True
    assert args.attn_dp_size == args.tp_size == 4
