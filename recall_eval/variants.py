"""Variant specs for `recall-eval compare A B [C ...]`: each argument names a server configuration.

Syntax (the variant's label is the argument text, verbatim):

    ITEMS                 overrides on the --profile profile       fp8   bf16   topk=1024   fp8,topk=1024
    PROFILE               a profile by name                        dsv4-flash
    PROFILE:ITEMS         a profile by name, with overrides        dsv4-flash:bf16,topk=1024

    ITEMS  := ITEM[,ITEM...]
    ITEM   := fp8 | bf16 | fp4            index-key precision (index_k_dtype)
            | topk=N                      index_topk, a whole number >= 1
            | mem=F                       mem_fraction_static, a fraction in (0, 1]
            | ctx=N                       context_length in tokens
            | tp=N                        tensor-parallel size
            | page=N                      KV page size
            | dtype=fp8|bf16|fp4          the long form of the precision words
            | fault=NAME                  a planted indexer bug of the reference engine (its --help lists them)
            | effort=low|medium|high      reasoning_effort sent with every request
            | think=on|off                the chat template's thinking switch (chat_template_kwargs
                                          {"thinking": .., "enable_thinking": ..}: DeepSeek's and Qwen's names)

A single word without ':' that is not a precision word and has no '=' is a profile name. Overrides are
returned as Profile field names, the form launchers.profiles.resolve_profile takes; request knobs
(effort, think) as RunSpec field names in `request`. A malformed spec raises BadInput naming the bad
part (exit code 2).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from recall_eval.errors import BadInput

DTYPE_WORDS = ("fp8", "bf16", "fp4")
PROFILE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")


@dataclass(frozen=True)
class VariantSpec:
    """One compare argument, parsed."""

    label: str  # the argument text as typed: names the variant in runs and reports
    profile: str | None  # a profile name, or None for the compare's --profile
    overrides: dict[str, Any] = field(default_factory=dict)  # Profile field name -> value
    request: dict[str, Any] = field(default_factory=dict)  # RunSpec field name -> value (request knobs)


def _whole(minimum: int) -> Callable[[str], int]:
    def parse(text: str) -> int:
        value = int(text)  # ValueError for non-integers
        if value < minimum:
            raise ValueError(f"must be at least {minimum}")
        return value

    return parse


def _fraction(text: str) -> float:
    value = float(text)
    if not 0.0 < value <= 1.0:
        raise ValueError("must be a fraction in (0, 1]")
    return value


def _dtype(text: str) -> str:
    if text not in DTYPE_WORDS:
        raise ValueError(f"must be one of {', '.join(DTYPE_WORDS)}")
    return text


def _name(text: str) -> str:
    if not re.fullmatch(r"[a-z][a-z0-9_]*", text):
        raise ValueError("must be a lowercase name")
    return text


# key -> (Profile field, value parser, what the value is)
OVERRIDE_KEYS: dict[str, tuple[str, Callable[[str], Any], str]] = {
    "topk": ("index_topk", _whole(1), "a whole number >= 1"),
    "mem": ("mem_fraction_static", _fraction, "a fraction in (0, 1]"),
    "ctx": ("context_length", _whole(1), "a whole number of tokens >= 1"),
    "tp": ("tp", _whole(1), "a whole number >= 1"),
    "page": ("page_size", _whole(1), "a whole number >= 1"),
    "dtype": ("index_k_dtype", _dtype, f"one of {', '.join(DTYPE_WORDS)}"),
    "fault": ("fault", _name, "a planted fault's name (the reference server's --fault lists them)"),
}
EFFORTS = ("low", "medium", "high")


def _effort(text: str) -> str:
    if text not in EFFORTS:
        raise ValueError(f"must be one of {', '.join(EFFORTS)}")
    return text


def _thinking(text: str) -> dict[str, bool]:
    if text not in ("on", "off"):
        raise ValueError("must be on or off")
    return {"thinking": text == "on", "enable_thinking": text == "on"}


# key -> (RunSpec field, value parser, what the value is): knobs sent with each request
REQUEST_KEYS: dict[str, tuple[str, Callable[[str], Any], str]] = {
    "effort": ("reasoning_effort", _effort, f"one of {', '.join(EFFORTS)}"),
    "think": ("chat_template_kwargs", _thinking, "on or off"),
}
_KNOWN = f"{', '.join(DTYPE_WORDS)}, " + ", ".join(f"{key}=" for key in [*OVERRIDE_KEYS, *REQUEST_KEYS])
# One line on the syntax, for errors about a variant.
VARIANT_SYNTAX = (
    f"a variant is overrides ({_KNOWN}; comma-separated, e.g. fp8,topk=1024), "
    "a profile name, or PROFILE:OVERRIDES (e.g. dsv4-flash:bf16)"
)


_REQUEST_FIELDS = frozenset(field_name for field_name, _, _ in REQUEST_KEYS.values())


def _bad(spec: str, why: str) -> BadInput:
    return BadInput(f"variant {spec!r}: {why}")


def _parse_item(spec: str, item: str) -> tuple[str, Any]:
    """One override item -> (Profile field, value)."""
    if item in DTYPE_WORDS:
        return "index_k_dtype", item
    key, equals, value_text = item.partition("=")
    key, value_text = key.strip(), value_text.strip()
    if not equals:
        raise _bad(
            spec, f"unknown override {item!r} (known: {_KNOWN}; a profile name goes first: PROFILE:ITEMS)"
        )
    if key not in OVERRIDE_KEYS and key not in REQUEST_KEYS:
        raise _bad(spec, f"unknown override key {key!r} (known: {_KNOWN})")
    field_name, parse, what = OVERRIDE_KEYS.get(key) or REQUEST_KEYS[key]
    if not value_text:
        raise _bad(spec, f"{key}= has no value ({key} is {what})")
    try:
        return field_name, parse(value_text)
    except ValueError as err:
        raise _bad(spec, f"{key}={value_text}: {key} is {what}") from err


def _parse_items(spec: str, items_text: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """(Profile overrides, request knobs) of comma-separated items."""
    overrides: dict[str, Any] = {}
    request: dict[str, Any] = {}
    items = items_text.split(",")
    for position, raw in enumerate(items, start=1):
        item = raw.strip()
        if not item:
            raise _bad(
                spec, f"override {position} is empty (write comma-separated overrides, e.g. fp8,topk=1024)"
            )
        field_name, value = _parse_item(spec, item)
        target = request if field_name in _REQUEST_FIELDS else overrides
        if field_name in target:
            raise _bad(spec, f"{item!r} sets {field_name} a second time")
        target[field_name] = value
    return overrides, request


def _check_profile_name(spec: str, name: str) -> str:
    if not PROFILE_NAME.fullmatch(name):
        raise _bad(spec, f"{name!r} is not a profile name (letters, digits, '_', '.', '-')")
    return name


def parse_variant(spec: str) -> VariantSpec:
    """Parse one compare argument (see the module docstring for the syntax)."""
    text = spec.strip()
    if not text:
        raise _bad(spec, "empty (write overrides like fp8,topk=1024 or a profile name)")
    profile_text, colon, items_text = text.partition(":")
    if colon:
        profile = _check_profile_name(spec, profile_text.strip())
        if not items_text.strip():
            raise _bad(
                spec, f"nothing after ':' (write overrides, or just {profile!r} for the profile as is)"
            )
        overrides, request = _parse_items(spec, items_text)
        return VariantSpec(label=spec, profile=profile, overrides=overrides, request=request)
    if "," not in text and "=" not in text and text not in DTYPE_WORDS:
        return VariantSpec(label=spec, profile=_check_profile_name(spec, text), overrides={})
    overrides, request = _parse_items(spec, text)
    return VariantSpec(label=spec, profile=None, overrides=overrides, request=request)


def check_labels(labels: Sequence[str]) -> None:
    """A compare needs at least two variants, each with its own label."""
    if len(labels) < 2:
        raise BadInput("compare needs at least two variants (e.g. `recall-eval compare fp8 bf16`)")
    seen: set[str] = set()
    for label in labels:
        if not label.strip():
            raise BadInput("a variant label is empty; give each variant a name or spec")
        if label in seen:
            raise BadInput(f"variant {label!r} is given twice; each variant must differ")
        seen.add(label)


def parse_variants(specs: Sequence[str]) -> list[VariantSpec]:
    """Parse every compare argument; at least two, all labels distinct."""
    check_labels(specs)
    return [parse_variant(spec) for spec in specs]
