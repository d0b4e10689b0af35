"""Typer declarations of the options that several commands share, built from the library's options.

Help text comes from each field's `doc` and its default from the DEFAULT_* instances in
recall_eval.api.options, so a default is written once. Every option defaults to None (not given);
the library fills in the defaults.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Annotated, Any

import typer

from recall_eval.api.options import (
    DEFAULT_GRID,
    DEFAULT_PROFILE,
    DEFAULT_REQUEST,
    GridOptions,
    RequestOptions,
    TargetOptions,
)


def describe(group: type, name: str, default: Any = None, doc: str | None = None) -> str:
    """Help text of a field: its doc as a sentence, then '(default: X)' when it has a default."""
    field = next(item for item in dataclasses.fields(group) if item.name == name)
    text = doc or field.metadata["doc"]
    sentence = text[0].upper() + text[1:] + "."
    return f"{sentence} (default: {default})" if default is not None else sentence


def flag(group: type, name: str, default: Any = None, doc: str | None = None, **extra: Any) -> Any:
    """typer.Option for a field of an options group, spelled as the field's flag."""
    field = next(item for item in dataclasses.fields(group) if item.name == name)
    return typer.Option(field.metadata["flag"], help=describe(group, name, default, doc), **extra)


def _grid(name: str, doc: str | None = None) -> Any:
    return flag(GridOptions, name, getattr(DEFAULT_GRID, name), doc)


Lengths = Annotated[
    str | None,
    _grid("lengths", "context lengths: A..B (8 geometric points), A..B:N, or A,B,C"),
]
Depths = Annotated[str | None, _grid("depths", "needle depths in percent: A..B:N (linear) or A,B,C")]
Trials = Annotated[int | None, _grid("trials")]
Seed = Annotated[int | None, _grid("seed")]
MaxTokens = Annotated[int | None, _grid("max_tokens")]
Suite = Annotated[str | None, _grid("suites", "comma-separated suites")]
Concurrency = Annotated[int | None, flag(RequestOptions, "concurrency", DEFAULT_REQUEST.concurrency)]
RequestTimeout = Annotated[
    float | None,
    flag(RequestOptions, "request_timeout_s", f"{DEFAULT_REQUEST.request_timeout_s:g}"),
]
ProfilesFile = Annotated[Path | None, flag(TargetOptions, "profiles_file")]
ProfileName = Annotated[str | None, flag(TargetOptions, "profile", DEFAULT_PROFILE)]
Model = Annotated[
    str | None,
    flag(TargetOptions, "model", "the first one served", "model name to send to --base-url"),
]
IndexKDtype = Annotated[
    str | None, flag(TargetOptions, "index_k_dtype", doc="profile override: fp8, bf16 or fp4")
]
IndexTopk = Annotated[int | None, flag(TargetOptions, "index_topk", doc="profile override: DSA index_topk")]
MemFraction = Annotated[
    float | None, flag(TargetOptions, "mem_fraction_static", doc="profile override: mem_fraction_static")
]
ContextLength = Annotated[
    int | None, flag(TargetOptions, "context_length", doc="profile override: context length in tokens")
]
ModelPath = Annotated[str | None, flag(TargetOptions, "model_path", doc="profile override: model path")]
Tp = Annotated[int | None, flag(TargetOptions, "tp", doc="profile override: tensor parallel size")]
Port = Annotated[int | None, flag(TargetOptions, "port", doc="profile override: the launched server's port")]
OpenReport = Annotated[bool, typer.Option("--open", help="Open the report in the browser.")]
# How requests are sent: auth (never stored) and the request knobs (stored in the run spec).
ApiKey = Annotated[str | None, flag(RequestOptions, "api_key", metavar="KEY")]
Header = Annotated[
    list[str] | None,
    flag(
        RequestOptions, "headers", doc="extra HTTP header 'Name: value' (repeatable)", metavar="'NAME: VALUE'"
    ),
]
ReasoningEffort = Annotated[
    str | None,
    flag(
        RequestOptions,
        "reasoning_effort",
        doc="reasoning effort sent with every request as reasoning_effort (low, medium, high)",
        metavar="EFFORT",
    ),
]
ChatTemplateKwargs = Annotated[str | None, flag(RequestOptions, "chat_template_kwargs", metavar="JSON")]
ExtraBody = Annotated[str | None, flag(RequestOptions, "extra_body", metavar="JSON")]
Scoring = Annotated[
    str | None,
    typer.Option(
        "--scoring",
        help="Headline verdict of the console, report and --fail-under: lenient (RULER-compatible: the "
        "expected value appears) or strict (the answer commits to it); both are stored. (default: lenient)",
    ),
]
