"""Every option of the library and the CLI, declared once, as typed options objects; `None` = "not given".

One declaration per option: a field made by `option(flag, help, ...)` carries the option's command-line
name, the type it has there, its default, its help, and (being a field) the options object it fills.
The library reads the fields; `resolved()` fills the unset ones from the declared defaults; the CLI
builds every command's typer parameters from the same declarations (recall_eval.cli.options), so
`--help`, the defaults and the library cannot drift apart. Options are grouped by what they change:
GridOptions (which cases), RequestOptions (how requests are sent: the server access, and one field
per request setting of recall_eval.types.RequestSettings, generated from it), TargetOptions (which
server: a profile with overrides, or a running one). SweepOptions, CompareOptions and ResumeOptions
hold the groups plus their own options; a command takes a whole object, or some of its fields
(`only(...)`, see recall_eval.cli.options).

How to add an option (touches this module, the code that reads it, and its test):
1. Add a field to the group it belongs to, made by `option()`: flag, help (a phrase; the CLI makes it
   a sentence and appends the default), `default=` when it has one, `cli=` for the type it has on the
   command line (str unless said), `metavar=` when useful. A field name is unique across the groups:
   `api.sweep(name=value)` routes flat keywords to the group holding it.
2. Read it where it takes effect in the library (a setting of the HTTP client: recall_eval.api.targets).
3. Every command taking that group has the flag now; test it through the library or the CLI, and say
   in README how to use it.
A request setting (how every request is sent, stored in the run: --stop, --extra-body, --concurrency)
is not added here: it is one field of recall_eval.types.RequestSettings, whose Knob declares its flag,
help, whether it changes verdicts and how it is sent; RequestOptions is generated from those fields.
An option two objects share (e.g. --fail-under of sweep and compare) is one function below that
returns its field, called in both.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from recall_eval.errors import BadInput
from recall_eval.exit_codes import RecallGate  # light: it imports pandas and scipy only when judging
from recall_eval.types import Knob, RequestSettings, RunSpec, request_knobs

_Options = TypeVar("_Options")


@dataclass(frozen=True)
class Declared:
    """What a field declares about its option (dataclasses.Field.metadata["option"])."""

    flag: str  # the command-line name ("--trials"; "--report/--no-report" for an on/off pair)
    help: str  # what it means, a phrase
    default: Any = None  # the value when not given (None: unset stays unset)
    cli: Any = str  # its type on the command line (str, int, float, Path, bool, list[str])
    metavar: str | None = None
    default_text: str | None = None  # the default as --help shows it, when not str(default)
    minimum: float | None = None  # a given value below it is bad input
    above: float | None = None  # a given value must be above it

    @property
    def name(self) -> str:
        """The flag's first spelling ('--report/--no-report' -> '--report')."""
        return self.flag.split("/")[0]


def option(
    flag: str,
    help: str,
    *,
    default: Any = None,
    cli: Any = str,
    metavar: str | None = None,
    default_text: str | None = None,
    minimum: float | None = None,
    above: float | None = None,
) -> Any:
    """A declared option: unset (None) until given, `default` when resolved. An on/off option
    (cli=bool) holds its default from the start (False or True), as a flag does. `minimum` / `above`:
    the range check_ranges() enforces."""
    declared = Declared(flag, help, default, cli, metavar, default_text, minimum, above)
    start = default if cli is bool else None
    return field(default=start, metadata={"option": declared})


def declared(options: type | object, name: str) -> Declared | None:
    for item in dataclasses.fields(options):  # type: ignore[arg-type]
        if item.name == name:
            return item.metadata.get("option")
    raise KeyError(name)


def flag_of(options: type | object, name: str) -> str:
    """The command-line spelling of an options field (e.g. request_timeout_s -> --request-timeout)."""
    found = declared(options, name)
    return found.name if found is not None else "--" + name.replace("_", "-")


def given(options: object) -> list[str]:
    """Names of the declared fields that are given (not None, not their on/off default)."""
    names = []
    for item in dataclasses.fields(options):  # type: ignore[arg-type]
        found = item.metadata.get("option")
        value = getattr(options, item.name)
        if found is None or value is None or (found.cli is bool and value == found.default):
            continue
        names.append(item.name)
    return names


def check_ranges(options: object) -> None:
    """BadInput for a given value outside its declared range (before anything starts)."""
    for item in dataclasses.fields(options):  # type: ignore[arg-type]
        found: Declared | None = item.metadata.get("option")
        value = getattr(options, item.name)
        if found is None or not isinstance(value, int | float) or isinstance(value, bool):
            continue
        if found.minimum is not None and value < found.minimum:
            raise BadInput(f"{found.name} {value:g}: must be at least {found.minimum:g}")
        if found.above is not None and value <= found.above:
            raise BadInput(f"{found.name} {value:g}: must be above {found.above:g}")


def defaults(options: type[_Options]) -> _Options:
    """The options object with every declared default filled in."""
    fills = {
        item.name: item.metadata["option"].default
        for item in dataclasses.fields(options)  # type: ignore[arg-type]
        if "option" in item.metadata
    }
    return options(**fills)


def resolved(options: _Options, defaults_of: _Options | None = None) -> _Options:
    """`options` with every unset (None) field taken from `defaults_of` (default: the declarations)."""
    base = defaults_of if defaults_of is not None else defaults(type(options))
    fills = {
        item.name: getattr(base, item.name)
        for item in dataclasses.fields(options)  # type: ignore[arg-type]
        if getattr(options, item.name) is None
    }
    return dataclasses.replace(options, **fills)  # type: ignore[type-var]


def _spec_default(name: str) -> Any:
    """RunSpec's own default for a field (types.py documents each stored field once, with its default)."""
    return RunSpec.model_fields[name].default


# ---- options two objects share: one declaration each ---------------------------------------------


def _profile() -> Any:
    return option("--profile", "server profile to launch (see `recall-eval profiles`)", default="reference")


def _profiles_file() -> Any:
    return option("--profiles-file", "TOML file with more profiles", cli=Path)


def _scoring() -> Any:
    return option(
        "--scoring",
        "the verdict the headline figures use: lenient (RULER-compatible: the expected value appears) or "
        "strict (the answer commits to it); both are stored",
        default="lenient",
        default_text="lenient; for `report`, what the run or compare chose",
        metavar="lenient|strict",
    )


def _model() -> Any:
    return option(
        "--model", "model name to send to --base-url", default_text="the first one served", metavar="NAME"
    )


def _capture_indexer() -> Any:
    return option(
        "--capture-indexer",
        "ask SGLang's /generate for the DSA indexer's selections and record, per indexer layer, whether "
        "the needle was selected (misses get a cause: selection or generation)",
        cli=bool,
        default=False,
    )


def _fail_under() -> Any:
    return option(
        "--fail-under",
        "exit 4 when recall (in a compare: any variant's) is below this: overall (0.95), per suite "
        "(needle=0.98,config=0.8), or both; a scored suite (vt=0.85) is gated on its mean score; judged "
        "on the --scoring verdict; one line per variant and suite that missed. For CI gating",
        cli=str,
        metavar="RECALL",
    )


def _junit() -> Any:
    return option(
        "--junit",
        "write JUnit XML: one test case per suite x length (compare: per variant too); a failure carries "
        "the cell's recall, interval and worst cases",
        cli=Path,
        metavar="FILE",
    )


def _metrics() -> Any:
    return option(
        "--metrics",
        "write metrics.json: the recall per suite and length, the verdict, and provenance (tool version, "
        "--commit, server version, model, settings, hardware)",
        cli=Path,
        metavar="FILE",
    )


def _commit() -> Any:
    return option(
        "--commit",
        "the git commit of the code under test, recorded in --metrics and the step summary",
        metavar="SHA",
    )


def _step_summary() -> Any:
    return option(
        "--step-summary",
        "append a markdown summary (headline, per-suite table, verdict) to FILE",
        cli=Path,
        default_text="$GITHUB_STEP_SUMMARY when set, as under GitHub Actions",
        metavar="FILE",
    )


def _render_report() -> Any:
    return option("--report/--no-report", "render the report when the run ends", cli=bool, default=True)


# ---- the groups ------------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class GridOptions:
    """Which cases run: identical grids give identical cases (the same case ids)."""

    suites: str | Sequence[str] | None = option(
        "--suite",
        "suites, comma-separated: needle, config, multiturn; ruler (its 11 tasks) or one task (vt, "
        "niah_single_1, ...); mrcr; ruler-jsonl:PATH, jsonl:PATH (prepared files); SUITE~nocontext "
        "(no-context baseline)",
        default=",".join(_spec_default("suites")),
    )
    lengths: str | Sequence[int] | None = option(
        "--lengths",
        "context lengths: A..B (8 geometric points), A..B:N, or A,B,C; sweep and study also take "
        "search:MIN..MAX[:BUDGET], the cliff found by bisection",
        default="338..22597",
    )
    depths: str | Sequence[float] | None = option(
        "--depths", "needle depths in percent: A..B:N (linear) or A,B,C", default="0..100:5"
    )
    trials: int | None = option(
        "--trials",
        "independent needles per (length, depth) cell",
        cli=int,
        default=_spec_default("trials"),
        minimum=1,
    )
    seed: int | None = option(
        "--seed", "seed of every generated case", cli=int, default=_spec_default("seed")
    )
    max_tokens: int | None = option(
        "--max-tokens",
        "answer budget in tokens, for every case (not given: RULER's tasks and mrcr send each case with its "
        "task's own budget)",
        cli=int,
        default=_spec_default("max_tokens"),
        default_text=f"{_spec_default('max_tokens')} for needle, config and multiturn; RULER's tasks and mrcr "
        "their own",
        minimum=1,
    )


@dataclass(frozen=True, kw_only=True)
class _Access:
    """How requests reach the server: used, never stored (run.json records only whether a key was sent,
    the header names, and that TLS checking was off, as an adaptation); a resume must be given them again."""

    probe_timeout_s: float | None = option(
        "--probe-timeout",
        "seconds a server may take to answer GET /v1/models before the run starts (a gateway or a "
        "server still loading may need more)",
        cli=float,
        default=10.0,  # recall_eval.server_probe.PROBE_WAIT_S (not imported: --help stays free of httpx)
        default_text="10",
        above=0,
    )
    api_key: str | None = option(
        "--api-key",
        "API key sent as 'Authorization: Bearer KEY' (else $RECALL_EVAL_API_KEY, else $OPENAI_API_KEY)",
        metavar="KEY",
    )
    headers: Sequence[str] | None = option(
        "--header",
        "extra HTTP header 'Name: value' on every request (repeatable)",
        cli=list[str],
        metavar="'NAME: VALUE'",
    )
    ca_bundle: str | Path | None = option(
        "--ca-bundle",
        "CA certificate file (PEM) to trust for https servers (else $REQUESTS_CA_BUNDLE, then $SSL_CERT_FILE)",
        cli=Path,
        metavar="PATH",
    )
    insecure: bool = option(
        "--insecure",
        "do not check the server's TLS certificate (a warning line says so)",
        cli=bool,
        default=False,
    )


def _setting_field(name: str, knob: Knob) -> tuple[str, Any, Any]:
    """The options field of a request setting, from its declaration (recall_eval.types.RequestSettings)."""
    default = RequestSettings.model_fields[name].default
    shown = f"{default:g}" if isinstance(default, float) else None
    declared = option(
        knob.flag, knob.help, default=default, cli=knob.cli, metavar=knob.metavar, default_text=shown,
        minimum=knob.minimum, above=knob.above,
    )  # fmt: skip
    return name, Any, declared


# How requests are sent: the access options above, then one field per request setting, generated from
# RequestSettings (a resume may change the settings that change no verdict; it keeps the others).
RequestOptions = dataclasses.make_dataclass(
    "RequestOptions",
    [_setting_field(name, knob) for name, knob in request_knobs().items()],
    bases=(_Access,),
    frozen=True,
    kw_only=True,
)
RequestOptions.__module__ = __name__  # where typing.get_type_hints and pickle look it up
RequestOptions.__doc__ = (
    "How requests are sent: the server access (never stored) and every request setting "
    "(recall_eval.types.RequestSettings; stored in the RunSpec)."
)


@dataclass(frozen=True, kw_only=True)
class TargetOptions:
    """Which server answers: a profile to launch (with overrides) or a running one (base_url)."""

    profile: str | None = _profile()
    profiles_file: Path | None = _profiles_file()
    base_url: str | Sequence[str] | None = option(
        "--base-url",
        "a running OpenAI-compatible server; nothing is launched. Repeat it (or separate with commas) for "
        "replicas of one model: the cases are spread over them, --concurrency requests each",
        cli=list[str],
        metavar="URL",
    )
    model: str | None = _model()
    # Profile overrides: Profile field names, so they pass to launchers.profiles as they are.
    index_k_dtype: str | None = option("--index-k-dtype", "profile override: fp8, bf16 or fp4")
    index_topk: int | None = option("--index-topk", "profile override: DSA index_topk", cli=int)
    mem_fraction_static: float | None = option(
        "--mem-fraction", "profile override: mem_fraction_static", cli=float
    )
    context_length: int | None = option(
        "--context-length", "profile override: context length in tokens", cli=int
    )
    model_path: str | None = option("--model-path", "profile override: model path (a dir with config.json)")
    tp: int | None = option("--tp", "profile override: tensor parallel size", cli=int)
    port: int | None = option(
        "--port", "profile override: the port clients use (the router's, for PD)", cli=int
    )
    memory_limit_gb: float | None = option(
        "--memory-limit-gb", "profile override (reference engine): memory cap in GiB", cli=float
    )

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
    "memory_limit_gb",
)

# The defaults, as objects (derived from the declarations above; nothing is written twice).
DEFAULT_GRID = defaults(GridOptions)
DEFAULT_REQUEST = defaults(RequestOptions)
DEFAULT_PROFILE: str = defaults(TargetOptions).profile or "reference"
DEFAULT_VARIANT: str = _spec_default("variant")


@dataclass(frozen=True, kw_only=True)
class CiOptions:
    """What a CI job gates on and what it reads back."""

    baseline: str | Path | None = option(
        "--baseline",
        "a baseline file (`recall-eval baseline save`): run only this candidate, on the baseline's cases "
        "(its grid when none is given), and exit 4 when it is significantly worse on the paired cases "
        "(exact McNemar per suite and pooled, Holm-adjusted; scored suites: Wilcoxon signed-rank)",
        cli=Path,
        metavar="FILE",
    )
    tolerance: str | float | None = option(
        "--tolerance",
        "with --baseline: accept a drop up to this (2pp, 0.02): fail only when the drop's 95% interval "
        "lies wholly above it",
        default_text="the baseline's own, else 0",
        metavar="DROP",
    )
    fail_fast: bool = option(
        "--fail-fast",
        "stop as soon as the recall so far is significantly below the baseline (with --baseline) or below "
        "--fail-under, at up to 10 looks with the error rate kept (README, CI gate); exit 4 with the cases spent",
        cli=bool,
        default=False,
    )
    junit: Path | None = _junit()
    metrics: Path | None = _metrics()
    commit: str | None = _commit()
    step_summary: Path | None = _step_summary()


@dataclass(frozen=True, kw_only=True)
class ClusterOptions:
    """Where launched servers run: this machine, or a Ray cluster (launchers/executors.py)."""

    ray: str | None = option(
        "--ray",
        "place each launched server on this Ray cluster (HOST:PORT of its head, or 'local' to start one "
        "for the run) as an actor holding the profile's GPUs; variants run at once when the cluster has "
        "room. Needs pip install 'recall-eval[ray]'",
        metavar="ADDRESS",
    )
    ray_node_gpus: int | None = option(
        "--ray-node-gpus",
        "GPUs of one cluster node: a server needing more spans nodes (default: the largest node's count)",
        cli=int,
        minimum=1,
    )


@dataclass(frozen=True, kw_only=True)
class SweepOptions:
    """Everything `sweep` takes. Build it whole, or pass flat keywords to `api.sweep(...)`."""

    grid: GridOptions = GridOptions()
    request: RequestOptions = RequestOptions()
    target: TargetOptions = TargetOptions()
    variant: str | None = option(
        "--variant", "label of this run in reports and comparisons", default=DEFAULT_VARIANT
    )
    out: str | Path | None = option("--out", "directory to create the run in, or the run id to use")
    capture_indexer: bool = _capture_indexer()
    render_report: bool = _render_report()
    fail_under: str | RecallGate | None = _fail_under()  # the gate of RunRecord.verdict
    scoring: str | None = _scoring()
    ci: CiOptions = CiOptions()  # a CI gate: --baseline, --fail-fast, --junit, --metrics, step summary
    cluster: ClusterOptions = ClusterOptions()

    @classmethod
    def of(cls, **fields: Any) -> SweepOptions:
        """From flat keywords: api.sweep(lengths="338..4096", trials=1, base_url=...)."""
        return updated(cls(), **fields)


@dataclass(frozen=True, kw_only=True)
class CompareOptions:
    """Everything `compare` takes besides the variants."""

    grid: GridOptions = GridOptions()
    request: RequestOptions = RequestOptions()
    profile: str | None = _profile()  # the profile that override variants apply to
    profiles_file: Path | None = _profiles_file()
    base_urls: Sequence[str] | None = option(
        "--base-url",
        "a running server per variant, in the variants' order (no launch; the variants then run at once, "
        "their requests interleaved case by case); replicas of one variant's model comma-separated (URL1,URL2)",
        cli=list[str],
        metavar="URL",
    )
    model: str | None = _model()
    rerun: bool = option(
        "--rerun", "run every variant again instead of reusing finished runs", cli=bool, default=False
    )
    capture_indexer: bool = _capture_indexer()
    # the CI gate (CompareRecord.verdict), checked on every variant (recall_eval.exit_codes.parse_fail_under)
    fail_under: str | RecallGate | None = _fail_under()
    # what CI reads, as for sweep (one test case per variant x suite x length)
    junit: Path | None = _junit()
    metrics: Path | None = _metrics()
    commit: str | None = _commit()
    step_summary: Path | None = _step_summary()
    fail_on_regression: bool = option(
        "--fail-on-regression",
        "exit 4 when a variant's recall is significantly lower than the first variant's on the same cases "
        "(the report's exact McNemar test), per suite; for a scored suite (RULER, mrcr, files) "
        "its scores (Wilcoxon signed-rank on the per-case differences); p < 0.05 after Holm's correction over "
        "every test of the compare. Put the baseline first",
        cli=bool,
        default=False,
    )
    scoring: str | None = _scoring()
    cluster: ClusterOptions = ClusterOptions()

    @classmethod
    def of(cls, **fields: Any) -> CompareOptions:
        return updated(cls(), **fields)


@dataclass(frozen=True, kw_only=True)
class StudyOptions:
    """Everything `study` takes besides the axes (recall_eval.study_axes)."""

    grid: GridOptions = GridOptions()
    request: RequestOptions = RequestOptions()
    profile: str | None = _profile()  # the profile that the axes' overrides apply to
    profiles_file: Path | None = _profiles_file()
    baseline: str | None = option(
        "--baseline",
        "the cell every other cell is tested against, as a variant (e.g. dtype=bf16,topk=2048)",
        default_text="the first cell: each axis's first value",
        metavar="CELL",
    )
    only: Sequence[str] | None = option(
        "--only",
        "keep only the cells matching this partial variant (e.g. dtype=fp8); repeat for several",
        cli=list[str],
        metavar="CELL",
    )
    skip: Sequence[str] | None = option(
        "--skip",
        "leave out the cells matching this partial variant; repeat for several",
        cli=list[str],
        metavar="CELL",
    )
    force: bool = option(
        "--force",
        "launch the cells the memory planner predicts do not fit too, and record what happened beside the prediction",
        cli=bool,
        default=False,
    )
    cost: str | None = option(
        "--cost",
        "what the recommendation minimises: memory (KV bytes per token), decode (highest decode tok/s) or ttft",
        default="memory",
        metavar="memory|decode|ttft",
    )
    rerun: bool = option(
        "--rerun", "run every cell again instead of reusing finished runs", cli=bool, default=False
    )
    fail_under: str | RecallGate | None = _fail_under()  # checked on every cell that ran
    scoring: str | None = _scoring()
    cluster: ClusterOptions = ClusterOptions()

    @classmethod
    def of(cls, **fields: Any) -> StudyOptions:
        return updated(cls(), **fields)


@dataclass(frozen=True, kw_only=True)
class ResumeOptions:
    """What may change when an interrupted run is finished: how requests are sent, and where to."""

    request: RequestOptions = RequestOptions()
    base_url: str | Sequence[str] | None = None  # the same server at another URL (or its replicas)
    port: int | None = None  # a launched server's port (it does not change results)
    render_report: bool = _render_report()
    retry: str | Sequence[str] | None = option(
        "--retry",
        "with --resume: run the cases whose outcome is one of these again (e.g. error,timeout); earlier "
        "attempts stay in results.jsonl, the latest counts",
        metavar="OUTCOMES",
    )
    stop_leftovers: bool = option(
        "--stop-leftovers",
        "with --resume: stop a server of this run that outlived its harness (else the resume refuses)",
        cli=bool,
        default=False,
    )
    fail_under: str | RecallGate | None = None  # as SweepOptions.fail_under, against the run's suites

    @classmethod
    def of(cls, **fields: Any) -> ResumeOptions:
        return updated(cls(), **fields)


_GROUPS = ("grid", "request", "target", "ci", "cluster")


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
