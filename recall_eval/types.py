"""Core types of recall-eval. This module imports nothing from the project.

Every field is documented once, here. Models are frozen pydantic models so that
they serialize to the run directory (run.json, results.jsonl) and back unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any, Literal, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr

# run.json's format (results.jsonl lines follow their run's); recall_eval.migrations brings an older run.json
# up to it. Bump it with every change to a stored model, with a migration and a test that reads a run
# directory written by the previous version (tests/recall_eval/fixtures/).
FORMAT_VERSION = 2

Outcome = Literal[
    "pass", "miss", "empty", "truncated", "too_long", "oom", "crash", "timeout", "error", "not_applicable"
]
# Answers from a live model: these count toward recall.
RECALL_OUTCOMES: tuple[Outcome, ...] = ("pass", "miss", "empty", "truncated")
# Infrastructure outcomes: shown, counted and explained, never folded into recall.
INFRA_OUTCOMES: tuple[Outcome, ...] = ("too_long", "oom", "crash", "timeout", "error")
# Neither: the cell cannot be built at its length (the suite's smallest prompt is longer); never sent,
# never counted in recall, shown as N/A with Result.error saying why.
NOT_APPLICABLE_OUTCOMES: tuple[Outcome, ...] = ("not_applicable",)
# A suite's no-context baseline (`needle~nocontext`): its questions without their haystacks. Shown beside
# its suite, never part of a headline recall or score, an effective length or a gate.
NO_CONTEXT_SUFFIX = "~nocontext"


def is_baseline(suite: str) -> bool:
    """True for a no-context baseline suite's name."""
    return suite.endswith(NO_CONTEXT_SUFFIX)


Role = Literal["system", "user", "assistant"]
IndexKDtype = Literal["fp8", "bf16", "fp4"]
Engine = Literal["reference", "sglang", "vllm", "external"]  # facts per engine: recall_eval/engines.py
RunStatus = Literal["running", "interrupted", "finished", "failed"]
MissCause = Literal["selection", "generation"]


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class _Stored(BaseModel):
    """A model stored in a run directory: a field it does not know (written by a newer recall-eval) is
    kept, not refused, and written back where the file is rewritten (model_extra)."""

    model_config = ConfigDict(frozen=True, extra="allow")


class ChatMessage(_Frozen):
    role: Role
    content: str


class NeedleSpan(_Frozen):
    """Where the fact that answers the question sits in the prompt (for offsets and indexer coverage)."""

    message_index: int  # index into Case.messages
    char_start: int  # character offset of the fact inside that message's content
    char_end: int  # one past its last character


class Case(_Frozen):
    """One question to ask a server, with everything needed to score the answer."""

    id: str  # stable hash of suite + params + seed: the identity used for resume and paired comparisons
    suite: str  # "needle", "config", "multiturn"
    messages: tuple[ChatMessage, ...]  # the chat as sent to /v1/chat/completions
    expected: tuple[str, ...]  # accepted answers; a pass contains one of them (case-insensitive)
    distractors: tuple[str, ...] = ()  # values present in the prompt that must not be given as the answer
    needle: NeedleSpan | None = None  # where the answering fact is
    target_tokens: int  # requested prompt length in the server's tokens
    depth_percent: float  # requested position of the fact in the haystack, 0 = start, 100 = end
    trial: int = 0  # index of the independent needle within one (length, depth) cell
    seed: int  # seed the case was generated from
    # suite-specific parameters (variant, n_facts, format...)
    params: dict[str, Any] = Field(default_factory=dict)
    # Filled by the runner's calibration against the server tokenizer:
    prompt_tokens: int | None = None  # rendered prompt length in the server's tokens
    needle_token_offset: int | None = None  # token offset of the fact's first token in the rendered prompt
    needle_token_end: int | None = None  # token offset one past the fact's last token
    # which tokenizer measured the above (recall_eval.tokenization: "server:/v1/tokenize", "server:/tokenize",
    # "server:/apply-template+/tokenize", "server:usage.prompt_tokens", or the estimate "tiktoken:cl100k_base")
    tokenizer: str | None = None
    # set by calibration when even the suite's smallest form of this case exceeds target_tokens: why;
    # such a case is never sent and ends as the "not_applicable" outcome
    not_applicable: str | None = None
    # set by calibration when the server refused this case's prompt as longer than its context: why;
    # such a case is never sent again and ends as the "too_long" outcome
    too_long: str | None = None
    # a scored case (recall_eval.metrics): the metric that grades its answer as a fraction ("string_match_all",
    # "string_match_part", "mrcr"); None for pass/miss cases, which give recall
    metric: str | None = None
    # the case's own answer budget in tokens (RULER's tokens_to_generate for its task, MRCR's), sent as
    # max_tokens when the run takes per-case budgets (RunSpec.case_budgets); None: the run's max_tokens
    max_tokens: int | None = None
    # a case kept without its prompt (run memory stays bounded in the number of cases): the recipe form
    # and filler size that render its messages again, just before it is sent (see without_prompt)
    _source: tuple[CaseRecipe, int] | None = PrivateAttr(default=None)

    def without_prompt(self, form: CaseRecipe, filler_words: int) -> Case:
        """This case with messages () that with_prompt() renders again from `form` at `filler_words`
        (deterministic: the same bytes as calibration measured)."""
        light = self.model_copy(update={"messages": ()})
        light._source = (form, filler_words)
        return light

    def with_prompt(self) -> Case:
        """The case with its messages: itself when it kept them, else rendered again from its recipe (a
        new object the caller drops after sending, so no prompt outlives its request)."""
        if self._source is None or self.messages:
            return self
        form, filler_words = self._source
        return self.model_copy(update={"messages": form.render(filler_words).messages})


@runtime_checkable
class CaseRecipe(Protocol):
    """A case whose haystack size is still open (suites yield these; the runner calibrates them).

    render(filler_words) must be deterministic and monotone: more filler words never
    give a shorter prompt. The runner searches filler_words so that the rendered
    prompt hits target_tokens in the server's tokens.
    """

    suite: str
    target_tokens: int
    depth_percent: float
    trial: int
    seed: int

    def render(self, filler_words: int) -> Case: ...

    def words_guess(self, tokens_per_word: float) -> int:
        """A first guess of filler_words for target_tokens, given a tokens-per-word ratio."""
        ...


@runtime_checkable
class ShrinkableRecipe(CaseRecipe, Protocol):
    """A recipe with smaller forms of the same case (fewer or terser case-made parts, same id), which
    calibration tries in turn when the target is shorter than the prompt with no filler at all."""

    def smaller(self) -> CaseRecipe | None:
        """The next smaller form, or None when this is the smallest."""
        ...


class Tokenizer(Protocol):
    """Counts tokens the way the server does (its own /v1/tokenize where it has one)."""

    name: str  # recorded in every case (see Case.tokenizer)

    async def count_messages(self, messages: tuple[ChatMessage, ...]) -> int:
        """Tokens of the whole rendered chat request, template and generation prompt included."""
        ...


class IndexerCoverage(_Stored):
    """Whether the DSA indexer selected the fact's tokens (issue: indexer coverage)."""

    # per indexer layer: share of answer-producing query positions that selected the fact
    layers: tuple[float, ...]
    last_prompt_token: tuple[bool, ...]  # per indexer layer: selected at the last prompt token
    cause: MissCause | None = None  # for misses: selection (not selected in most layers) or generation


class Completion(_Stored):
    """What the server returned for one request, with client-side timings."""

    text: str  # the answer: content with any <think>...</think> removed
    reasoning: str = ""  # reasoning_content, or the removed <think> text (at most MAX_REASONING_CHARS kept)
    reasoning_cut: bool = False  # the reasoning was longer than what is kept: `reasoning` is its start
    streamed: bool = True  # False: the server answered one JSON body; ttft_s and itl_s are not measured
    finish_reason: str | None = None  # "stop", "length", ... as the server reported it
    prompt_tokens: int | None = None  # server usage.prompt_tokens
    completion_tokens: int | None = None  # server usage.completion_tokens (else counted content chunks)
    # where completion_tokens came from: "usage" (the server's), "tokenized" (the server's tokenizer on the
    # answer, where it streamed no usage) or "chunks" (streamed chunks counted: neither was available);
    # None in results stored before this was recorded
    completion_tokens_source: Literal["usage", "tokenized", "chunks"] | None = None
    ttft_s: float | None = None  # request sent -> first content token
    # gaps between successive content chunks: one gap per token after the first streamed one (SGLang
    # and the reference engine send one token per chunk; an end token that streams no text has no gap)
    itl_s: tuple[float, ...] = ()
    latency_s: float | None = None  # request sent -> stream closed
    # raw selections if captured (layers x k), else None
    indexer_topk: tuple[tuple[int, ...], ...] | None = None

    @property
    def decode_tokens_per_s(self) -> float | None:
        """Measured gaps over their sum: the tokens streamed after the first, per second they took.

        Not (completion_tokens - 1): a stopped completion counts its end token in usage, but that token
        streams no text and so has no measured gap (it would read ~1/n too fast).
        """
        decode_time = sum(self.itl_s)
        return len(self.itl_s) / decode_time if decode_time > 0 else None


class Result(_Stored):
    """One finished case: one line of results.jsonl."""

    case_id: str
    suite: str
    variant: str  # the run's variant label ("default", "fp8", "bf16", "topk=1024", ...)
    outcome: Outcome  # the lenient verdict (recall_eval.scoring), or an infrastructure outcome
    # the strict verdict (recall_eval.scoring): a lenient pass that does not commit to the expected value
    # (another value first or after it, a prompt echo) is a miss; equal to outcome otherwise. None in
    # results stored before strict scoring existed.
    strict_outcome: Outcome | None = None
    strict_why: str | None = None  # why the strict verdict is a miss where the lenient one passed
    answer: str = ""  # the model's answer text (untrusted: escape when rendering)
    expected: tuple[str, ...] = ()
    target_tokens: int
    depth_percent: float
    trial: int = 0
    prompt_tokens: int | None = None  # calibrated length (tokenizer) or server usage when available
    needle_token_offset: int | None = None
    tokenizer: str | None = None
    completion: Completion | None = None  # None for cases that never reached a live model
    coverage: IndexerCoverage | None = None
    # for infrastructure and not_applicable outcomes: the reason, with the matched log line if any
    error: str | None = None
    # 1 + the case's earlier attempts in results.jsonl (a --retry rerun, e.g. after the server died on it
    # and was relaunched); 1 in results stored before it was counted
    attempt: int = 1
    started_at: float  # unix time
    finished_at: float  # unix time
    params: dict[str, Any] = Field(default_factory=dict)  # copy of Case.params for reports
    # the prompt length the server itself counted for this request (usage.prompt_tokens), or where it
    # streams no usage its tokenizer endpoint's count of this prompt (see server_prompt_tokens_source)
    server_prompt_tokens: int | None = None
    # "usage", or the tokenizer endpoint that counted it (Case.tokenizer: server:/extras/tokenize, ...)
    server_prompt_tokens_source: str | None = None
    # server_prompt_tokens - target_tokens; None when the server gave no count
    length_error_tokens: int | None = None
    # the server's count is off the target by more than tolerance (1%, at least 8 tokens): reports flag it
    length_off_target: bool = False
    endpoint: str | None = None  # base URL of the replica that served the case (None: not sent)
    score: float | None = None  # scored cases only: the metric's grade of the answer in [0, 1] (Case.metric)
    # the answer budget the case's request was sent with (None: never sent, or stored before it was kept)
    max_tokens: int | None = None


class PDPart(_Stored):
    """One server of a multi-server deployment behind sglang_router: prefill/decode disaggregated
    (prefill + decode + router), or data-parallel (workers + router)."""

    role: Literal["prefill", "decode", "router", "worker"]
    port: int
    base_gpu_id: int = 0
    tp: int | None = None  # None: the profile's tp
    extra_args: tuple[str, ...] = ()
    index_k_dtype: IndexKDtype | None = None  # None: the profile's; prefill and decode must agree
    bootstrap_port: int | None = None  # prefill only: its KV-transfer bootstrap port (SGLang default 8998)
    env: dict[str, str] = Field(default_factory=dict)  # added to the profile's env for this server only


class ServerFields(_Stored):
    """Profile fields every engine takes: naming, where it listens, what is added to its command and
    environment. The fields of one engine are its model below (a kind's `fields_model`); Profile is
    all of them, so that a profile file, run.json and the CLI read one flat table."""

    name: str
    engine: Engine
    description: str | None = None  # one line shown by `recall-eval profiles`
    served_model_name: str | None = None
    host: str = "127.0.0.1"
    port: int = 30000  # 0: launchers pick a port that is free at launch
    extra_args: tuple[str, ...] = ()
    env: dict[str, str] = Field(default_factory=dict)
    ready_timeout_s: float = 900.0


class ExternalFields(_Stored):
    """engine="external": a running server, reached at its URL."""

    base_url: str | None = None
    replica_base_urls: tuple[str, ...] = ()  # more replicas of the same model


class DsaLaunchFields(_Stored):
    """Launch settings of the DSA experiments, taken by every engine that launches a DSA model."""

    model_path: str | None = None  # model dir / hub id; None for the reference engine's bundled weights
    tp: int = 1
    mem_fraction_static: float | None = None
    context_length: int | None = None
    index_topk: int | None = None
    index_k_dtype: IndexKDtype = "fp8"


class VllmFields(DsaLaunchFields):
    """engine="vllm"."""

    dp: int = 1  # data-parallel size (--data-parallel-size); SGLang's DP is PD parts or extra_args
    # the program that starts the server, in vLLM's own environment: its `vllm` executable or its Python
    # interpreter (vLLM pins its own torch, so it usually lives in a venv of its own); None: `vllm`
    executable: str | None = None
    kv_cache_dtype: str | None = None  # --kv-cache-dtype (auto, fp8, ...); the DSA index keys are fp8


class SglangStyleFields(DsaLaunchFields):
    """Settings the reference engine shares with SGLang (its server takes SGLang's flags)."""

    max_total_tokens: int | None = None
    enable_return_indexer_topk: bool = False
    pd: tuple[PDPart, ...] = ()  # non-empty for a multi-server profile behind sglang_router


class SglangFields(SglangStyleFields):
    """engine="sglang"."""

    page_size: int | None = None
    dsa_prefill_backend: str | None = None
    dsa_decode_backend: str | None = None


class ReferenceFields(SglangStyleFields):
    """engine="reference": the bundled DSA engine."""

    memory_limit_gb: float | None = None  # a real cap on the process's memory
    # a planted indexer-kernel bug (launchers/reference/faults.py), to show that a gate catches it; None
    # (no fault) unless a profile or a compare variant (fault=NAME) sets one
    fault: str | None = None


# ServerFields last, so that its fields come first in a stored profile (pydantic orders fields from
# the end of the MRO)
class Profile(ReferenceFields, SglangFields, VllmFields, ExternalFields, ServerFields):
    """How to start (or reach) a server: the fields of every engine, each declared (typed, with its
    default) once in that engine's model above; a profile sets only its own engine's (its kind checks)."""


@dataclass(frozen=True)
class Knob:
    """What a request setting declares besides its type and default: `Annotated[type, Knob(...)]` on a
    field of RequestSettings. The CLI option, the RunSpec field, the request body, the reuse key, the
    report's settings table and the console all read this one declaration."""

    flag: str  # its command-line option ("--stop"); the options field has the setting's name
    help: str  # what it means, a phrase (the CLI makes it a sentence and appends the default)
    label: str  # how reports and the console name it
    # True: it changes what the model answers, so runs that differ in it are not reused for each other
    # and a resume keeps the run's own; False: how requests are sent (a resume may change it)
    verdicts: bool
    # how it reaches the server: "field" (the body's field of the setting's name), "merged" (a JSON
    # object merged into the body last; a null removes that key), "client" (how the harness sends: not
    # in the body)
    sent: Literal["field", "merged", "client"]
    cli: Any = str  # its type on the command line (str, int, float, list[str]: repeatable)
    metavar: str | None = None
    json_object: bool = False  # given as a JSON object (text on the command line)
    minimum: float | None = None  # a given value below it is bad input
    above: float | None = None  # a given value must be above it


class RequestSettings(_Stored):
    """How every request of a run is sent, one field per setting (as inspect_ai's GenerateConfig).

    Each field's Knob says its option, whether it changes verdicts and how it is sent; adding a setting
    is one field here (plus, for a "client" one, the code that uses it). Stored flat in RunSpec."""

    concurrency: Annotated[
        int,
        Knob("--concurrency", "requests in flight at once, per endpoint", "concurrency",
             verdicts=False, sent="client", cli=int, minimum=1),
    ] = 1  # fmt: skip
    request_timeout_s: Annotated[
        float,
        Knob("--request-timeout", "seconds per request", "request timeout (s)",
             verdicts=False, sent="client", cli=float, above=0),
    ] = 600.0  # fmt: skip
    retries: Annotated[
        int,
        Knob("--retries", "times a case's request is retried after a transient failure (429, 502, 503, 504, "
             "a dropped connection), with backoff, jitter and Retry-After honoured", "retries",
             verdicts=False, sent="client", cli=int, minimum=0),
    ] = 3  # fmt: skip
    # for thinking models and servers with their own options
    reasoning_effort: Annotated[
        str | None,
        Knob("--reasoning-effort", "reasoning effort sent with every request as reasoning_effort (low, "
             "medium, high)", "reasoning effort", verdicts=True, sent="field", metavar="EFFORT"),
    ] = None  # fmt: skip
    chat_template_kwargs: Annotated[
        dict[str, Any] | None,
        Knob("--chat-template-kwargs", "JSON object for the chat template, e.g. '{\"thinking\": true}'",
             "chat template kwargs", verdicts=True, sent="field", metavar="JSON", json_object=True),
    ] = None  # fmt: skip
    extra_body: Annotated[
        dict[str, Any] | None,
        Knob("--extra-body", "JSON object merged into every chat request body; a null value removes that key",
             "extra body", verdicts=True, sent="merged", metavar="JSON", json_object=True),
    ] = None  # fmt: skip

    stop: Annotated[
        tuple[str, ...] | None,
        Knob("--stop", "stop sequence sent with every request in `stop` (repeatable): the answer ends "
             "before it, as a deployment's stop strings end it", "stop sequences",
             verdicts=True, sent="field", cli=list[str], metavar="TEXT"),
    ] = None  # fmt: skip

    def body_fields(self) -> dict[str, Any]:
        """The settings sent in the request body: "field" ones that are set, then the "merged" objects
        (which win; a None in them stays, it removes that key)."""
        fields: dict[str, Any] = {}
        merged: dict[str, Any] = {}
        for name, knob in request_knobs().items():
            value = getattr(self, name)
            if value is None or value in ("", (), {}):
                continue
            if knob.sent == "field":
                fields[name] = list(value) if isinstance(value, tuple) else value
            elif knob.sent == "merged":
                merged.update(value)
        return {**fields, **merged}

    def settings(self, verdicts: bool | None = None) -> dict[str, Any]:
        """The settings by name (only those whose Knob.verdicts is `verdicts`, when given)."""
        return {
            name: getattr(self, name)
            for name, knob in request_knobs().items()
            if verdicts is None or knob.verdicts == verdicts
        }


def request_knobs() -> dict[str, Knob]:
    """Every request setting's declaration, in declaration order."""
    return {
        name: next(item for item in info.metadata if isinstance(item, Knob))
        for name, info in RequestSettings.model_fields.items()
    }


class RunSpec(RequestSettings):
    """What a run asks: identical specs give identical cases (resume, reuse in compare). Its request
    settings (RequestSettings' fields) are stored flat beside the grid."""

    suites: tuple[str, ...] = ("needle",)
    lengths: tuple[int, ...]
    depths: tuple[float, ...]
    trials: int = 2
    seed: int = 0
    max_tokens: int = 32  # answer budget (with case_budgets: of the cases without their own)
    # True when --max-tokens was not given and the suites set budgets per case (RULER's per task, MRCR's):
    # each case is sent with its own (Case.max_tokens); False: max_tokens for every case
    case_budgets: bool = False
    # False when max_tokens is the default (not given): a server found reasoning gets a thinking budget
    max_tokens_given: bool = True
    variant: str = "default"
    capture_indexer: bool = False
    # names of the extra headers sent (--header); values are never stored, and neither is the API key
    header_names: tuple[str, ...] = ()
    api_key_used: bool = False  # whether requests carried an API key (resume must be given it again)


class RunOwner(_Stored):
    """The process that runs (or last ran) a run: pid and start time name one process (a pid alone is
    reused), on this host (recall_eval.run_owner)."""

    pid: int
    started_at: float  # the process's start time (epoch seconds, as psutil reports it)
    host: str


class Run(_Stored):
    """The content of run.json."""

    format_version: int = FORMAT_VERSION
    run_id: str
    spec: RunSpec
    profile: Profile | None = None
    server_info: dict[str, Any] = Field(default_factory=dict)  # what /server_info and /v1/models said
    time_to_ready_s: float | None = None
    relaunches: int = 0
    versions: dict[str, str] = Field(default_factory=dict)  # recall-eval, python, server version...
    status: RunStatus = "running"
    created_at: float
    finished_at: float | None = None
    note: str | None = None  # why the run stopped, when it did not finish
    # how prompt lengths were measured ("server:/tokenize", "tiktoken:cl100k_base", ...)
    length_measure: str | None = None
    # suites whose lengths are estimates (no server tokenizer or usage: tiktoken); reports say so
    estimated_length_suites: tuple[str, ...] = ()
    # True when this run's requests were interleaved with another variant's on live servers at the same
    # time (compare with two --base-url): only then may their speeds be tested as paired samples.
    interleaved: bool = False
    # the verdict the headline figures use (console, report, --fail-under): "lenient" (RULER-compatible)
    # or "strict" (recall_eval.scoring); both verdicts are stored on every result either way
    scoring: Literal["lenient", "strict"] = "lenient"
    # cases the spec's suites generate, counted from their recipes (a file suite's rows, a generated
    # suite's lengths x depths x trials) when the run was created and again when it ran; None in runs
    # written before it was recorded (recall_eval.frame.planned_cases reads it)
    cases_planned: int | None = None
    # what the run changed to suit the server, by name, one line each (recall_eval.adaptations): a base
    # URL form, a field the server rejected, JSON answers to stream requests, untrusted usage counts,
    # TLS checks off, a thinking budget; reports list them
    adaptations: dict[str, str] = Field(default_factory=dict)
    # the process running it (set each time a sweep, resume or compare starts running it): a run stored
    # as running whose owner is gone is shown as `interrupted (no process)`; None in runs written before
    owner: RunOwner | None = None


class Endpoint(_Frozen):
    """A server the runner can talk to."""

    base_url: str  # e.g. http://127.0.0.1:30000
    model: str  # the model name to send in requests


class ServerDeath(_Frozen):
    """Why a launched server stopped answering, classified from exit status and log."""

    outcome: Literal["oom", "crash", "too_long"]
    reason: str  # one line: what happened
    log_line: str | None = None  # the log line that the classification matched
    exit_code: int | None = None


class ServerHandle(Protocol):
    """A server started by launchers; lets the runner tell a dead server from a slow one."""

    endpoint: Endpoint

    def poll_death(self) -> ServerDeath | None:
        """None while the server process is alive; its classified death once it has exited."""
        ...

    def relaunch(self) -> float:
        """Start the server again and wait until ready; returns the time to ready in seconds."""
        ...

    def note_served(self) -> None:
        """The server just answered a request (any HTTP answer): older log lines no longer explain a death."""
        ...

    def stop(self) -> None: ...
