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

A single word without ':' that is not a precision word and has no '=' is a profile name. Overrides are
returned as Profile field names, the form launchers.profiles.resolve_profile takes. A malformed spec
raises BadInput naming the bad part (exit code 2).
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


# key -> (Profile field, value parser, what the value is)
OVERRIDE_KEYS: dict[str, tuple[str, Callable[[str], Any], str]] = {
    "topk": ("index_topk", _whole(1), "a whole number >= 1"),
    "mem": ("mem_fraction_static", _fraction, "a fraction in (0, 1]"),
    "ctx": ("context_length", _whole(1), "a whole number of tokens >= 1"),
    "tp": ("tp", _whole(1), "a whole number >= 1"),
    "page": ("page_size", _whole(1), "a whole number >= 1"),
    "dtype": ("index_k_dtype", _dtype, f"one of {', '.join(DTYPE_WORDS)}"),
}
_KNOWN = f"{', '.join(DTYPE_WORDS)}, " + ", ".join(f"{key}=" for key in OVERRIDE_KEYS)
# One line on the syntax, for errors about a variant.
VARIANT_SYNTAX = (
    f"a variant is overrides ({_KNOWN}; comma-separated, e.g. fp8,topk=1024), "
    "a profile name, or PROFILE:OVERRIDES (e.g. dsv4-flash:bf16)"
)


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
    if key not in OVERRIDE_KEYS:
        raise _bad(spec, f"unknown override key {key!r} (known: {_KNOWN})")
    field_name, parse, what = OVERRIDE_KEYS[key]
    if not value_text:
        raise _bad(spec, f"{key}= has no value ({key} is {what})")
    try:
        return field_name, parse(value_text)
    except ValueError as err:
        raise _bad(spec, f"{key}={value_text}: {key} is {what}") from err


def _parse_items(spec: str, items_text: str) -> dict[str, Any]:
    overrides: dict[str, Any] = {}
    items = items_text.split(",")
    for position, raw in enumerate(items, start=1):
        item = raw.strip()
        if not item:
            raise _bad(
                spec, f"override {position} is empty (write comma-separated overrides, e.g. fp8,topk=1024)"
            )
        field_name, value = _parse_item(spec, item)
        if field_name in overrides:
            raise _bad(spec, f"{item!r} sets {field_name} a second time")
        overrides[field_name] = value
    return overrides


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
        return VariantSpec(label=spec, profile=profile, overrides=_parse_items(spec, items_text))
    if "," not in text and "=" not in text and text not in DTYPE_WORDS:
        return VariantSpec(label=spec, profile=_check_profile_name(spec, text), overrides={})
    return VariantSpec(label=spec, profile=None, overrides=_parse_items(spec, text))


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
