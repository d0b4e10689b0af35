"""The vllm kind: `vllm serve`, launched from vLLM's own environment (it pins its own torch).

Its argv (launchers/argv/vllm.py) is checked before a launch by vLLM's own `serve` argument parser and
validation, run by the Python of that environment: what vLLM would refuse is refused in seconds, in
vLLM's words, with nothing started.
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import ClassVar

from launchers.argv.spec import LaunchSpec
from launchers.argv.vllm import DEFAULT_EXECUTABLE, VLLM_SERVER_MODULE, rank_vllm_spec, runs_python, vllm_spec
from launchers.kinds.base import ServerKind
from launchers.readiness import Probe
from recall_eval.types import Engine, Profile, VllmFields

PARSE_TIMEOUT_S = 300.0  # importing vLLM's CLI pulls in torch (tens of seconds on a busy CPU)
INSTALL_HINT = "install vLLM in its own venv (python3 -m venv V && V/bin/pip install vllm) and set executable"
# Run by vLLM's interpreter: its `serve` subcommand's parser and validation, as `vllm serve` runs them,
# on each command line given (one import of vLLM for all of them).
_PARSE = """
import contextlib, io, json, sys
out = {"error": None, "version": None, "refusals": []}
try:
    import vllm
    out["version"] = getattr(vllm, "__version__", None)
    from vllm.entrypoints.cli.serve import ServeSubcommand
    try:  # where vLLM 0.32 keeps them; older releases: vllm.entrypoints.openai.cli_args
        from vllm.entrypoints.launchers.cli_args import make_arg_parser, validate_parsed_serve_args
    except ImportError:
        from vllm.entrypoints.openai.cli_args import make_arg_parser, validate_parsed_serve_args
    try:
        from vllm.utils.argparse_utils import FlexibleArgumentParser
    except ImportError:
        from vllm.utils import FlexibleArgumentParser
except BaseException as err:
    out["error"] = f"{type(err).__name__}: {err}".splitlines()[0][:300]
else:
    for argv in json.loads(sys.argv[1]):
        parser = FlexibleArgumentParser(prog="vllm")
        if argv[:1] == ["serve"]:  # the `vllm` program's subcommand
            ServeSubcommand().subparser_init(parser.add_subparsers(dest="subparser"))
        else:  # the server module's own parser (PYTHON -m vllm.entrypoints.openai.api_server)
            parser = make_arg_parser(parser)
        said = io.StringIO()
        try:
            with contextlib.redirect_stderr(said):
                validate_parsed_serve_args(parser.parse_args(argv))
            out["refusals"].append(None)
        except SystemExit:
            lines = [line for line in said.getvalue().splitlines() if ": error:" in line]
            out["refusals"].append(lines[-1].split(": error:", 1)[1].strip() if lines else "rejected")
        except BaseException as err:
            out["refusals"].append(f"{type(err).__name__}: {err}".splitlines()[0][:300])
print("\\nVLLM-PARSE " + json.dumps(out))
"""


class VllmKind(ServerKind):
    name: ClassVar[Engine] = "vllm"
    fields_model = VllmFields
    index_k_dtypes = ("fp8",)
    precision_refusal = (
        "vLLM's DSA indexer stores index keys in fp8 and has no flag for another precision upstream; "
        "use engine sglang (bundled bf16 patch) or the reference engine to compare index-key precisions"
    )
    topk_setting = '--hf-overrides {"index_topk": N}'
    length_endpoint = "server:/tokenize"

    def build(self, profile: Profile) -> list[LaunchSpec]:
        return [vllm_spec(profile)]

    def expected_model(self, profile: Profile) -> str | None:
        return profile.served_model_name or profile.model_path  # vLLM lists its model by the path given

    def probe(self, base_url: str, model: str | None) -> Probe:
        probe = super().probe(base_url, model)
        probe.use_health_generate = False  # vLLM's /health answers before the model is listed
        return probe

    def gpus_needed(self, profile: Profile) -> int:
        return 0  # vLLM checks its own devices (its CPU build serves without a GPU)

    def cluster_gpus(self, profile: Profile) -> int:
        return profile.tp * profile.dp  # on a cluster it reserves what it would use on GPUs

    def rank_specs(
        self, profile: Profile, nnodes: int, node_rank: int, dist_init_addr: str
    ) -> list[LaunchSpec]:
        return [rank_vllm_spec(profile, nnodes, node_rank, dist_init_addr)]

    def preflight(self, profile: Profile, specs: Sequence[LaunchSpec], full: bool) -> list[str]:
        (spec,) = specs
        python = interpreter_of(spec.argv[0])
        if python is None:
            return [
                f"{spec.argv[0]} not found (the profile's executable names vLLM's program); {INSTALL_HINT}"
            ]
        if not full:
            return []
        return parser_failures(python, spec)

    def plan_refusal(self, profile: Profile) -> str | None:
        return (
            f"profile {profile.name!r} (engine vllm): vLLM sizes its KV cache itself from what is left of "
            "gpu_memory_utilization after a profiling run, a memory model `plan` does not hold; start it "
            "(recall-eval serve) and read 'GPU KV cache size' in its log"
        )


def interpreter_of(executable: str) -> str | None:
    """The Python that runs vLLM: the executable itself, or the one its `vllm` script names (#!)."""
    found = shutil.which(executable) or (executable if os.path.isfile(executable) else None)
    if found is None or runs_python(found):
        return found
    try:
        with open(found, "rb") as script:
            first = script.readline(4096).decode("utf-8", "replace").strip()
    except OSError:
        return None
    if first.startswith("#!"):
        program = first[2:].split()[0] if first[2:].split() else ""
        if program and Path(program).name.startswith("python"):
            return program
    sibling = Path(found).with_name("python")  # a venv's bin/ holds both
    return str(sibling) if sibling.is_file() else None


class ParserUnavailable(Exception):
    """vLLM's parser could not be run by that interpreter; str() says why and how to fix it."""


@functools.cache
def vllm_refusals(
    python: str, argvs: tuple[tuple[str, ...], ...], env: tuple[tuple[str, str], ...] = ()
) -> tuple[str | None, ...]:
    """What vLLM's own `serve` parser and validation, run by `python` with the server's `env` on top
    of ours, say of each argv (from `serve` on): None for accepted, else vLLM's reason. Cached: the
    launch's preflight repeats the sweep's."""
    try:
        done = subprocess.run(
            [python, "-c", _PARSE, json.dumps([list(argv) for argv in argvs])],
            env={**os.environ, **dict(env), "VLLM_CONFIGURE_LOGGING": "0"},
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=PARSE_TIMEOUT_S,
        )
    except subprocess.TimeoutExpired:
        raise ParserUnavailable(f"vLLM's argument parser did not answer in {PARSE_TIMEOUT_S:.0f} s") from None
    except OSError as err:
        raise ParserUnavailable(f"cannot run {python}: {err.strerror}; {INSTALL_HINT}") from None
    marker = [line for line in done.stdout.splitlines() if line.startswith("VLLM-PARSE ")]
    if not marker:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1][:300]
        raise ParserUnavailable(f"{python} could not run vLLM's parser ({last}); {INSTALL_HINT}")
    result = json.loads(marker[-1].removeprefix("VLLM-PARSE "))
    if result["error"] is not None:
        raise ParserUnavailable(f"{python} cannot import vLLM ({result['error']}); {INSTALL_HINT}")
    return tuple(
        f"vLLM {result['version']}: {refusal}" if refusal else None for refusal in result["refusals"]
    )


def parser_failures(python: str, spec: LaunchSpec) -> list[str]:
    """vLLM's own parser on spec's argv; one line if it refuses or cannot be run."""
    program = spec.argv[0] if spec.argv[0] != DEFAULT_EXECUTABLE else "vllm (on PATH)"
    try:
        (refusal,) = vllm_refusals(python, (serve_args(spec),), tuple(sorted(spec.env.items())))
    except ParserUnavailable as err:
        return [f"{spec.name}: {err}"]
    return [] if refusal is None else [f"{spec.name}: {refusal} (the command line of {program})"]


def serve_args(spec: LaunchSpec) -> tuple[str, ...]:
    """The arguments vLLM parses: from `serve` on for its program, after the module for its Python."""
    if runs_python(spec.argv[0]):
        return spec.argv[spec.argv.index(VLLM_SERVER_MODULE) + 1 :]
    return spec.argv[spec.argv.index("serve") :]
