"""Options of sweep, compare and resume as typed objects; `None` means "not given".

Each group is a frozen dataclass whose fields all default to None. The defaults live once, in the
DEFAULT_* instances below (the same classes, filled in); `resolved()` fills the unset fields from them
and the CLI's help text quotes them. A field's `metadata["flag"]` is its command-line spelling, used
in error messages and in the CLI.

To add an option: add a field to the group it belongs to (GridOptions: which cases; RequestOptions: how
requests are sent; TargetOptions: which server), give it a default in the DEFAULT_* instance if it has
one, read it where it takes effect, and add the matching typer option in the CLI command. A field name
must be unique across the groups: `api.sweep(name=value)` routes flat keywords to the group holding it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from recall_eval.types import RunSpec

if TYPE_CHECKING:  # exit_codes needs pandas; the CLI's --help reads these options without it
    from recall_eval.exit_codes import RecallGate

_Options = TypeVar("_Options")


def option(flag: str, doc: str, no_default: bool = False) -> Any:
    """A field that is unset (None) by default; `flag` is its command-line name, `doc` its meaning.
    no_default: unset stays unset (an API key, a header, a request knob): no DEFAULT_* value."""
    return field(default=None, metadata={"flag": flag, "doc": doc, "no_default": no_default})


def flag_of(options: type | object, name: str) -> str:
    """The command-line spelling of an options field (e.g. request_timeout_s -> --request-timeout)."""
    for item in dataclasses.fields(options):  # type: ignore[arg-type]
        if item.name == name:
            return item.metadata.get("flag", "--" + name.replace("_", "-"))
    raise KeyError(name)


def given(options: object) -> list[str]:
    """Names of the fields that are set (not None, not False)."""
    return [
        item.name
        for item in dataclasses.fields(options)  # type: ignore[arg-type]
        if getattr(options, item.name) not in (None, False)
    ]


def resolved(options: _Options, defaults: _Options) -> _Options:
    """`options` with every unset (None) field taken from `defaults`."""
    fills = {
        item.name: getattr(defaults, item.name)
        for item in dataclasses.fields(options)  # type: ignore[arg-type]
        if getattr(options, item.name) is None
    }
    return dataclasses.replace(options, **fills)  # type: ignore[type-var]


@dataclass(frozen=True, kw_only=True)
class GridOptions:
    """Which cases run: identical grids give identical cases (the same case ids)."""

    suites: str | Sequence[str] | None = option("--suite", "suites, comma-separated or a list")
    lengths: str | Sequence[int] | None = option(
        "--lengths", "context lengths: A..B (8 geometric points), A..B:N, A,B,C, or a list of ints"
    )
    depths: str | Sequence[float] | None = option(
        "--depths", "needle depths in percent: A..B:N (linear), A,B,C, or a list"
    )
    trials: int | None = option("--trials", "independent needles per (length, depth) cell")
    seed: int | None = option("--seed", "seed of every generated case")
    max_tokens: int | None = option("--max-tokens", "answer budget in tokens")


@dataclass(frozen=True, kw_only=True)
class RequestOptions:
    """How requests are sent; a resumed run may change these without changing its cases.

    concurrency and request_timeout_s are stored in the RunSpec. A field that must not be stored (a
    credential, a header) travels only in this object, to recall_eval.http_client.make_http_client.
    """

    concurrency: int | None = option("--concurrency", "requests in flight at once, per endpoint")
    request_timeout_s: float | None = option("--request-timeout", "seconds per request")
    # never stored: the key and the header values (run.json records only whether a key was sent and
    # the header names); a resume must be given them again
    api_key: str | None = option(
        "--api-key",
        "API key sent as 'Authorization: Bearer KEY' (else $RECALL_EVAL_API_KEY, else $OPENAI_API_KEY)",
        no_default=True,
    )
    headers: Sequence[str] | None = option(
        "--header", "extra HTTP header 'Name: value' on every request", no_default=True
    )
    # stored in the RunSpec: they change what the model does (a resume keeps the run's own)
    reasoning_effort: str | None = option(
        "--reasoning-effort", "reasoning_effort sent with every request", no_default=True
    )
    chat_template_kwargs: str | Mapping[str, Any] | None = option(
        "--chat-template-kwargs",
        "JSON object for the chat template, e.g. '{\"thinking\": true}'",
        no_default=True,
    )
    extra_body: str | Mapping[str, Any] | None = option(
        "--extra-body", "JSON object merged into every chat request body", no_default=True
    )


@dataclass(frozen=True, kw_only=True)
class TargetOptions:
    """Which server answers: a profile to launch (with overrides) or a running one (base_url)."""

    profile: str | None = option("--profile", "server profile to launch")
    profiles_file: Path | None = option("--profiles-file", "TOML file with more profiles")
    base_url: str | Sequence[str] | None = option(
        "--base-url",
        "a running OpenAI-compatible server; nothing is launched (several: replicas of one model, sharing the cases)",
    )
    model: str | None = option("--model", "model name to send to base_url (default: the first served)")
    # Profile overrides: Profile field names, so they pass to launchers.profiles as they are.
    index_k_dtype: str | None = option("--index-k-dtype", "index-key precision: fp8, bf16 or fp4")
    index_topk: int | None = option("--index-topk", "DSA index_topk")
    mem_fraction_static: float | None = option("--mem-fraction", "mem_fraction_static")
    context_length: int | None = option("--context-length", "context length in tokens")
    model_path: str | None = option("--model-path", "model path")
    tp: int | None = option("--tp", "tensor parallel size")
    port: int | None = option("--port", "the launched server's port")

    def profile_overrides(self) -> dict[str, Any]:
        """The profile overrides as launchers.profiles.resolve_profile takes them (None: not given)."""
        return {name: getattr(self, name) for name in PROFILE_OVERRIDES}


PROFILE_OVERRIDES = (
    "index_k_dtype",
    "index_topk",
    "mem_fraction_static",
    "context_length",
    "model_path",
    "tp",
    "port",
)


def _spec_default(name: str) -> Any:
    """RunSpec's own default for a field (types.py documents each stored field once, with its default)."""
    return RunSpec.model_fields[name].default


# The defaults, once. Fields that RunSpec stores take RunSpec's defaults.
DEFAULT_GRID = GridOptions(
    suites=",".join(_spec_default("suites")),
    lengths="338..22597",
    depths="0..100:5",
    trials=_spec_default("trials"),
    seed=_spec_default("seed"),
    max_tokens=_spec_default("max_tokens"),
)
DEFAULT_REQUEST = RequestOptions(
    concurrency=_spec_default("concurrency"), request_timeout_s=_spec_default("request_timeout_s")
)
DEFAULT_PROFILE = "reference"
DEFAULT_VARIANT: str = _spec_default("variant")


@dataclass(frozen=True, kw_only=True)
class SweepOptions:
    """Everything `sweep` takes. Build it whole, or pass flat keywords to `api.sweep(...)`."""

    grid: GridOptions = GridOptions()
    request: RequestOptions = RequestOptions()
    target: TargetOptions = TargetOptions()
    variant: str | None = None  # label of the run in reports and comparisons (default: "default")
    out: str | Path | None = None  # directory to create the run in, or the run id to use
    capture_indexer: bool = False  # record per indexer layer whether the needle was selected
    render_report: bool = True  # write report.html when the run ends
    # the headline verdict: "lenient" (default, RULER-compatible) or "strict" (README, "Scoring")
    scoring: str | None = option("--scoring", "headline verdict: lenient (the default) or strict")

    @classmethod
    def of(cls, **fields: Any) -> SweepOptions:
        """From flat keywords: api.sweep(lengths="338..4096", trials=1, base_url=...)."""
        return updated(cls(), **fields)


@dataclass(frozen=True, kw_only=True)
class CompareOptions:
    """Everything `compare` takes besides the variants."""

    grid: GridOptions = GridOptions()
    request: RequestOptions = RequestOptions()
    profile: str | None = None  # the profile that override variants apply to (default: reference)
    profiles_file: Path | None = None
    base_urls: Sequence[str] | None = None  # one running server per variant, in order: variants are labels
    model: str | None = None  # model name to send to the base_urls
    rerun: bool = False  # run every variant again instead of reusing finished runs
    capture_indexer: bool = False
    # the CI gate (CompareRecord.verdict): every variant's recall at least this, overall ("0.95"), per
    # suite ("needle=0.98,config=0.8") or both (recall_eval.exit_codes.parse_fail_under)
    fail_under: str | RecallGate | None = None
    # a later variant significantly worse than the first on paired cases (the report's McNemar test)
    fail_on_regression: bool = False
    scoring: str | None = option("--scoring", "headline verdict: lenient (the default) or strict")

    @classmethod
    def of(cls, **fields: Any) -> CompareOptions:
        return updated(cls(), **fields)


@dataclass(frozen=True, kw_only=True)
class ResumeOptions:
    """What may change when an interrupted run is finished: how requests are sent, and where to."""

    request: RequestOptions = RequestOptions()
    base_url: str | Sequence[str] | None = None  # the same server at another URL (or its replicas)
    port: int | None = None  # a launched server's port (it does not change results)
    render_report: bool = True
    # outcomes whose cases run again ("error,timeout"); the earlier attempts stay in results.jsonl
    retry: str | Sequence[str] | None = None
    stop_leftovers: bool = False  # stop a server of this run that outlived its harness, instead of refusing

    @classmethod
    def of(cls, **fields: Any) -> ResumeOptions:
        return updated(cls(), **fields)


_GROUPS = ("grid", "request", "target")


def updated(options: _Options, **fields: Any) -> _Options:
    """`options` with flat keywords set: each goes to the group (grid, request, target) that has a field
    of that name, or onto `options` itself; an unknown name is a TypeError."""
    own = {item.name for item in dataclasses.fields(options)}  # type: ignore[arg-type]
    groups = {name: getattr(options, name) for name in _GROUPS if name in own}
    updates: dict[str, dict[str, Any]] = {name: {} for name in groups}
    top: dict[str, Any] = {}
    for name, value in fields.items():
        home = next(
            (group for group, obj in groups.items() if name in {f.name for f in dataclasses.fields(obj)}),
            None,
        )
        if home is not None:
            updates[home][name] = value
        elif name in own:
            top[name] = value
        else:
            raise TypeError(f"{type(options).__name__} has no option {name!r}")
    for group, changes in updates.items():
        if changes:
            top[group] = dataclasses.replace(top.get(group, groups[group]), **changes)
    return dataclasses.replace(options, **top)  # type: ignore[type-var]
