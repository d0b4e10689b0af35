"""Variant specs of `recall-eval compare`: overrides, profile names, and one-line errors for bad specs."""

from __future__ import annotations

import pytest

from recall_eval.errors import BadInput
from recall_eval.variants import VariantSpec, parse_variant, parse_variants


@pytest.mark.parametrize(
    ("spec", "profile", "overrides"),
    [
        ("fp8", None, {"index_k_dtype": "fp8"}),
        ("bf16", None, {"index_k_dtype": "bf16"}),
        ("topk=1024", None, {"index_topk": 1024}),
        ("fp8,topk=1024", None, {"index_k_dtype": "fp8", "index_topk": 1024}),
        ("mem=0.8", None, {"mem_fraction_static": 0.8}),
        ("ctx=32768", None, {"context_length": 32768}),
        ("tp=2,page=64", None, {"tp": 2, "page_size": 64}),
        ("dtype=bf16", None, {"index_k_dtype": "bf16"}),
        (" bf16 , topk=512 ", None, {"index_k_dtype": "bf16", "index_topk": 512}),
        ("dsv4-flash", "dsv4-flash", {}),
        ("reference", "reference", {}),
        ("dsv4-flash:bf16,topk=1024", "dsv4-flash", {"index_k_dtype": "bf16", "index_topk": 1024}),
        ("my_profile.v2:mem=1", "my_profile.v2", {"mem_fraction_static": 1.0}),
    ],
)
def test_good_specs(spec: str, profile: str | None, overrides: dict[str, object]) -> None:
    parsed = parse_variant(spec)
    assert parsed == VariantSpec(label=spec, profile=profile, overrides=overrides)


@pytest.mark.parametrize(
    ("spec", "names"),
    [
        ("", "empty"),
        ("fp8,", "override 2 is empty"),
        ("fp8,,topk=1", "override 2 is empty"),
        ("topk=", "topk= has no value"),
        ("topk=abc", "topk=abc"),
        ("topk=0", "topk=0"),
        ("topk=1.5", "topk=1.5"),
        ("mem=1.5", "mem=1.5"),
        ("mem=0", "mem=0"),
        ("ctx=-4", "ctx=-4"),
        ("dtype=int8", "dtype=int8"),
        ("fp8,bf16", "'bf16' sets index_k_dtype a second time"),
        ("topk=1,topk=2", "'topk=2' sets index_topk a second time"),
        ("foo=1", "unknown override key 'foo'"),
        ("fp8,turbo", "unknown override 'turbo'"),
        ("dsv4-flash:", "nothing after ':'"),
        (":fp8", "'' is not a profile name"),
        ("bad name!:fp8", "'bad name!' is not a profile name"),
        ("dsv4-flash:fp8:bf16", "unknown override 'fp8:bf16'"),
        ("hello world", "'hello world' is not a profile name"),
    ],
)
def test_bad_specs_name_the_bad_part(spec: str, names: str) -> None:
    with pytest.raises(BadInput) as info:
        parse_variant(spec)
    message = str(info.value)
    assert "\n" not in message
    assert names in message
    assert info.value.exit_code == 2


def test_parse_variants_needs_two_distinct() -> None:
    assert [v.label for v in parse_variants(["fp8", "bf16", "topk=1024"])] == ["fp8", "bf16", "topk=1024"]
    with pytest.raises(BadInput, match="at least two variants"):
        parse_variants(["fp8"])
    with pytest.raises(BadInput, match="'fp8' is given twice"):
        parse_variants(["fp8", "bf16", "fp8"])


@pytest.mark.parametrize(
    ("spec", "overrides", "knobs"),
    [
        ("effort=high", {}, {"reasoning_effort": "high"}),
        ("think=on", {}, {"chat_template_kwargs": {"thinking": True, "enable_thinking": True}}),
        ("think=off", {}, {"chat_template_kwargs": {"thinking": False, "enable_thinking": False}}),
        ("bf16,effort=low", {"index_k_dtype": "bf16"}, {"reasoning_effort": "low"}),
    ],
)
def test_request_knob_variants(spec, overrides, knobs):
    parsed = parse_variant(spec)
    assert (parsed.overrides, parsed.request) == (overrides, knobs)


@pytest.mark.parametrize(
    ("spec", "fragment"),
    [("effort=max", "effort is one of low, medium, high"), ("think=maybe", "think is on or off")],
)
def test_bad_request_knob_variants(spec, fragment):
    with pytest.raises(BadInput, match=fragment):
        parse_variant(spec)
