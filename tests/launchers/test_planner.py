"""Memory planner arithmetic on the shipped DeepSeek-V4-Flash / V3.2 configs and on a local model dir."""

from __future__ import annotations

import json

import pytest

from launchers.planner import GIB, index_key_bytes, layout_from_config, make_plan
from launchers.profiles import load_profiles
from recall_eval.errors import BadInput
from recall_eval.types import Profile


@pytest.fixture
def profiles(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    return load_profiles()


def test_index_key_bytes_match_sglangs_layouts():
    assert [index_key_bytes(dtype, 128) for dtype in ("fp8", "fp4", "bf16")] == [132, 68, 256]


def test_dsv4_flash_layout_from_its_published_config(profiles):
    plan = make_plan(profiles["dsv4-flash"], context_length=524288)
    layout = plan.layout
    assert (layout.family, layout.n_layers, layout.index_layers) == ("deepseek_v4", 43, 21)
    assert layout.compressed_layers == {4: 21, 128: 20}
    assert layout.slot_bytes == 448 + 2 * 64 + 8
    fp8, fp4, bf16 = plan.rows
    assert (
        fp8.index_bytes_per_token_layer,
        fp4.index_bytes_per_token_layer,
        bf16.index_bytes_per_token_layer,
    ) == (
        33,
        17,
        64,
    )
    assert fp8.index_bytes_per_token == 21 * 33
    assert bf16.delta_bytes_per_token == pytest.approx(21 * (256 - 132) / 4)  # 651 B per token
    assert bf16.delta_gib_at_context == pytest.approx(651 * 524288 / GIB)
    assert fp4.delta_bytes_per_token == pytest.approx(-21 * (132 - 68) / 4)
    # capacity falls as bytes per token rise, and sequences follow max tokens
    assert fp4.max_tokens > fp8.max_tokens > bf16.max_tokens
    assert fp8.sequences == fp8.max_tokens // 524288
    assert bf16.slots_change == pytest.approx(bf16.max_tokens / fp8.max_tokens - 1)
    assert -0.15 < bf16.slots_change < -0.05
    assert all(row.available for row in plan.rows)


def test_seed_figures_are_explained(profiles):
    notes = " ".join(make_plan(profiles["dsv4-flash"], context_length=524288).notes)
    assert "+2,604 B (2.54 KiB) per compressed slot" in notes  # the seed's ~2.5 KB/token
    assert "1.27 GiB" in notes  # the seed's ~1.3 GB at 524,288 tokens
    assert "13% fewer slots" in notes


def test_pool_follows_fraction_gpu_memory_weights_and_tp(profiles):
    profile = profiles["dsv4-flash"].model_copy(update={"mem_fraction_static": 0.5, "tp": 8})
    plan = make_plan(profile, gpu_mem_gib=100.0, weights_gib=80.0)
    assert plan.pool_gib == pytest.approx(0.5 * 100.0 - 80.0 / 8)
    token_bytes = int(plan.pool_gib * GIB) - plan.layout.fixed_bytes()
    assert plan.rows[0].max_tokens == int(token_bytes / plan.rows[0].kv_bytes_per_token) // 256 * 256


def test_dsv4_pages_are_padded_and_hca_rings_are_fixed_bytes_as_sglang_sizes_them(profiles):
    layout = make_plan(profiles["dsv4-flash"]).layout
    # a 256-token page of 584-byte slots rounds up to 576-byte units: 585 B per token; an HCA page holds 2
    padded = [layout.paged_slot_bytes(ratio) for ratio in (1, 4, 128)]
    assert padded == [585, 585, 864]
    # 20 HCA layers x (257 request slots x 128 + 129 rows = 33025, rounded up to 128: 33152) x 2 x 512 fp32
    assert layout.fixed_bytes() == 20 * 33152 * 2 * 512 * 4
    notes = " ".join(make_plan(profiles["dsv4-flash"]).notes)
    assert (
        "2.53 GiB of the pool go to the HCA layers' compress-state rings (256 request slots, SGLang's default"
        " for this model)" in notes
    )
    assert layout.kv_bytes_per_token("fp8") == pytest.approx(
        0.1 * (585 * 43 + 8 / 256 * 10240 * 21) + 21 * (585 + 132) / 4 + 20 * 864 / 128
    )


def test_a_profiles_max_running_requests_sizes_the_hca_rings(profiles):
    default = make_plan(profiles["dsv4-flash"])
    for extra in (("--max-running-requests", "64"), ("--disable-radix-cache", "--max-running-requests=64")):
        plan = make_plan(profiles["dsv4-flash"].model_copy(update={"extra_args": extra}))
        assert plan.layout.max_running_requests == 64
        # 20 HCA layers x (65 x 128 + 129 rows = 8449, rounded up to 128: 8576) x 2 x 512 fp32
        assert plan.layout.fixed_bytes() == 20 * 8576 * 2 * 512 * 4
        assert "(64 request slots, --max-running-requests in the profile)" in " ".join(plan.notes)
        assert plan.rows[0].max_tokens > default.rows[0].max_tokens


@pytest.mark.parametrize(
    ("extra", "fragment"),
    [
        (("--max-running-requests", "many"), "--max-running-requests: invalid int value: 'many'"),
        (("--max-running-requests=0",), "--max-running-requests 0: must be at least 1"),
        (("--max-running-requests",), "--max-running-requests: expected one argument"),
    ],
)
def test_a_bad_max_running_requests_is_one_line_naming_the_profile(profiles, extra, fragment):
    with pytest.raises(BadInput, match="profile 'dsv4-flash': extra_args") as err:
        make_plan(profiles["dsv4-flash"].model_copy(update={"extra_args": extra}))
    assert fragment in str(err.value) and "\n" not in str(err.value)


def test_dsv32_only_fp8_is_available(profiles):
    plan = make_plan(profiles["dsv32"])
    assert plan.layout.index_layers == 61 and plan.layout.index_ratio == 1
    assert [row.available for row in plan.rows] == [True, False, False]
    assert plan.rows[0].kv_bytes_per_token == 61 * (1152 + 132)
    assert plan.context_length == 163840


def test_local_model_dir_config_and_weights(tmp_path):
    config = {
        "num_hidden_layers": 4,
        "compress_ratios": [0, 4, 128, 4],
        "head_dim": 512,
        "qk_rope_head_dim": 64,
    }
    config["index_head_dim"] = 256
    (tmp_path / "config.json").write_text(json.dumps(config))
    (tmp_path / "model.safetensors").write_bytes(b"\0" * 4096)
    profile = Profile(name="local", engine="sglang", model_path=str(tmp_path), context_length=1000)
    plan = make_plan(profile)
    assert plan.config_source.endswith("config.json")
    assert plan.weights_gib == pytest.approx(4096 / GIB)
    assert plan.layout.index_layers == 2
    assert plan.rows[0].key_bytes == 256 + 2 * 4  # one fp32 scale per 128 dims


def test_unknown_models_are_refused_in_one_line():
    with pytest.raises(BadInput, match="no config.json"):
        make_plan(Profile(name="x", engine="sglang", model_path="org/Unknown-Model"))
    with pytest.raises(BadInput, match="neither compress_ratios"):
        layout_from_config({"num_hidden_layers": 2})
