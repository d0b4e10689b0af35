"""Command-line flags of the reference server, named as SGLang 0.5.23 names them.

Only the flags the reference engine can honour exist; any other flag is an argparse error
(exit 2), so a harness that passes an SGLang-only flag learns it at once instead of having it
silently ignored.
"""

from __future__ import annotations

import argparse
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from launchers.reference.faults import FAULTS, check

IndexKDtype = Literal["fp8", "bf16", "fp4"]
# what --index-k-dtype takes (fp4: SGLang 0.5.23's DeepSeek-V4 fp4 indexer format, launchers/dsa/fp4.py)
INDEX_K_DTYPES: tuple[IndexKDtype, ...] = ("fp8", "bf16", "fp4")
BF16_INDEX_K_ENV = "SGLANG_DSV4_BF16_INDEX_K"  # the env switch of the project's bf16 index-K SGLang patch
OVERRIDABLE_CONFIG_KEYS = ("index_topk",)  # runtime settings the weights do not fix
DEFAULT_MAX_RUNNING_REQUESTS = 8

_SUFFIXES = {"k": 10**3, "M": 10**6, "G": 10**9, "Ki": 2**10, "Mi": 2**20, "Gi": 2**30}


@dataclass(frozen=True)
class ServerArgs:
    host: str
    port: int
    model_path: Path | None  # None: the bundled weights
    served_model_name: str | None  # None: the engine's model name
    context_length: int | None
    max_total_tokens: int | None
    max_running_requests: int
    json_model_override_args: str  # as given (reported back in /server_info)
    index_topk: int | None  # from json_model_override_args; None: the engine default
    enable_return_indexer_topk: bool
    mem_fraction_static: float | None  # accepted for SGLang compatibility; reported, not used
    log_level: str
    index_k_dtype: IndexKDtype
    index_k_dtype_source: str  # "flag", "env SGLANG_DSV4_BF16_INDEX_K=1" or "default"
    memory_limit_gb: float | None
    fault: str | None  # a planted indexer bug (launchers/reference/faults.py); None normally
    disable_radix_cache: bool  # SGLang's name: no prefix cache (launchers/reference/prefix_cache.py)
    # as SGLang's: the argv as given (so it carries --api-key; /server_info shows it, the log does not)
    launch_command: str = field(repr=False)
    # SGLang's --api-key: Bearer auth on every route. Printed in the start-up `server_args=` line, as
    # SGLang prints it: the harness masks it in the log it writes (launchers/log_mask.py)
    api_key: str | None = None


def token_count(value: str) -> int:
    """An integer, optionally with an SI (k, M, G) or IEC (Ki, Mi, Gi) suffix, as SGLang accepts."""
    match = re.fullmatch(r"(\d+(?:\.\d+)?)(Ki|Mi|Gi|k|M|G)?", value.strip())
    if match is None:
        raise argparse.ArgumentTypeError(f"invalid token count: {value!r} (examples: 32768, 32k, 32Ki)")
    number, suffix = match.groups()
    if suffix is None:
        if "." in number:
            raise argparse.ArgumentTypeError(f"invalid token count: {value!r} (a whole number is needed)")
        return int(number)
    return int(float(number) * _SUFFIXES[suffix])


def _positive_float(value: str) -> float:
    number = float(value)
    if number <= 0:
        raise argparse.ArgumentTypeError(f"must be > 0, got {value}")
    return number


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m launchers.reference.server",
        description="The reference DSA engine behind the subset of SGLang 0.5.23's HTTP API that recall-eval uses.",
    )
    parser.add_argument("--host", default="127.0.0.1", help="The host of the HTTP server.")
    parser.add_argument("--port", type=int, default=30000, help="The port of the HTTP server.")
    parser.add_argument(
        "--model-path", type=Path, default=None, help="Weights directory (default: the bundled weights)."
    )
    parser.add_argument("--served-model-name", default=None, help="Model name reported by /v1/models.")
    parser.add_argument("--context-length", type=token_count, default=None, help="Longest prompt + answer.")
    parser.add_argument(
        "--max-total-tokens", type=token_count, default=None, help="KV pool capacity in tokens."
    )
    parser.add_argument(
        "--max-running-requests",
        type=int,
        default=DEFAULT_MAX_RUNNING_REQUESTS,
        help="Requests generating at once; more wait in a queue.",
    )
    parser.add_argument(
        "--json-model-override-args",
        default="{}",
        help='JSON overrides of the model config; the reference engine honours {"index_topk": N}.',
    )
    parser.add_argument(
        "--enable-return-indexer-topk",
        action="store_true",
        help="Allow /generate to return the indexer top-k selections (return_indexer_topk).",
    )
    parser.add_argument(
        "--mem-fraction-static",
        type=float,
        default=None,
        help="Accepted for SGLang compatibility; the CPU pool is sized by --max-total-tokens.",
    )
    parser.add_argument(
        "--api-key",
        default=None,
        help="As SGLang: every route but /health* needs 'Authorization: Bearer KEY' (401 otherwise).",
    )
    parser.add_argument(
        "--log-level", default="info", choices=["debug", "info", "warning", "error", "critical"]
    )
    parser.add_argument(
        "--index-k-dtype",
        choices=list(INDEX_K_DTYPES),
        default=None,
        help=f"Storage of the indexer keys (default fp8, or bf16 when {BF16_INDEX_K_ENV}=1); fp4 as SGLang's "
        "--enable-deepseek-v4-fp4-indexer stores them.",
    )
    parser.add_argument(
        "--memory-limit-gb",
        type=_positive_float,
        default=None,
        help="Reference only: cap the process's data memory (RLIMIT_DATA) at this many GiB.",
    )
    parser.add_argument(
        "--disable-radix-cache",
        "--disable-prefix-cache",
        dest="disable_radix_cache",
        action="store_true",
        help="Turn off the prefix cache (on by default, as SGLang's radix cache: a prompt that starts "
        "like a finished one reuses its KV pages and index keys for the shared whole pages).",
    )
    parser.add_argument(
        "--fault",
        choices=list(FAULTS),
        default=None,
        help="Reference only: plant an indexer-kernel bug, to show a gate catches it: "
        + "; ".join(f"{name}: {what}" for name, what in FAULTS.items()),
    )
    return parser


def resolve_index_k_dtype(flag: str | None, environ: Mapping[str, str]) -> tuple[IndexKDtype, str]:
    """The flag decides when given; otherwise SGLANG_DSV4_BF16_INDEX_K=1 selects bf16; default fp8.

    A flag that contradicts the env switch is refused rather than silently overruled.
    """
    env_bf16 = environ.get(BF16_INDEX_K_ENV, "").strip() == "1"
    if flag is not None and flag != "bf16" and env_bf16:
        raise ValueError(
            f"--index-k-dtype {flag} contradicts {BF16_INDEX_K_ENV}=1 in the environment; "
            f"drop one of them (the env switch selects bf16)"
        )
    if flag is not None:
        if flag not in INDEX_K_DTYPES:
            raise ValueError(f"--index-k-dtype {flag}: expected one of {', '.join(INDEX_K_DTYPES)}")
        return flag, "flag"  # type: ignore[return-value]
    if env_bf16:
        return "bf16", f"env {BF16_INDEX_K_ENV}=1"
    return "fp8", "default"


def parse_index_topk(override_json: str) -> int | None:
    """index_topk from --json-model-override-args; other keys are refused (the weights fix them)."""
    try:
        overrides = json.loads(override_json)
    except json.JSONDecodeError as exc:
        raise ValueError(f"--json-model-override-args is not valid JSON: {exc}") from exc
    if not isinstance(overrides, dict):
        raise ValueError("--json-model-override-args must be a JSON object, e.g. '{\"index_topk\": 1024}'")
    unknown = sorted(set(overrides) - set(OVERRIDABLE_CONFIG_KEYS))
    if unknown:
        raise ValueError(
            f"--json-model-override-args: the reference engine cannot override {unknown}; "
            f"only {list(OVERRIDABLE_CONFIG_KEYS)} are runtime settings"
        )
    topk = overrides.get("index_topk")
    if topk is None:
        return None
    if isinstance(topk, bool) or not isinstance(topk, int) or topk <= 0:
        raise ValueError(f"--json-model-override-args: index_topk must be a positive integer, got {topk!r}")
    return topk


def parse_server_args(argv: Sequence[str], environ: Mapping[str, str]) -> ServerArgs:
    """Parse argv; bad values end the process through parser.error (exit 2, one line)."""
    parser = build_parser()
    ns = parser.parse_args(list(argv))
    try:
        index_k_dtype, source = resolve_index_k_dtype(ns.index_k_dtype, environ)
        index_topk = parse_index_topk(ns.json_model_override_args)
        check(ns.fault, index_k_dtype, prefix_cache=not ns.disable_radix_cache)
    except ValueError as exc:
        parser.error(str(exc))
    for name in ("context_length", "max_total_tokens", "max_running_requests"):
        value = getattr(ns, name)
        if value is not None and value <= 0:
            parser.error(f"--{name.replace('_', '-')} must be > 0, got {value}")
    return ServerArgs(
        host=ns.host,
        port=ns.port,
        model_path=ns.model_path,
        served_model_name=ns.served_model_name,
        context_length=ns.context_length,
        max_total_tokens=ns.max_total_tokens,
        max_running_requests=ns.max_running_requests,
        json_model_override_args=ns.json_model_override_args,
        index_topk=index_topk,
        enable_return_indexer_topk=ns.enable_return_indexer_topk,
        mem_fraction_static=ns.mem_fraction_static,
        log_level=ns.log_level,
        index_k_dtype=index_k_dtype,
        index_k_dtype_source=source,
        memory_limit_gb=ns.memory_limit_gb,
        fault=ns.fault,
        disable_radix_cache=ns.disable_radix_cache,
        launch_command=" ".join(["python -m launchers.reference.server", *argv]),
        api_key=ns.api_key or None,
    )
