"""What the core knows about each server engine, as typed data.

The launchers' registry (`launchers/kinds/`) holds what each kind does: its argv, readiness, preflight.
The core must not import launchers, yet a few of its decisions depend on the engine (is there a
process the run started, so that its settings are known? what is the engine called in a table?): they
read the facts here, never the engine's name. `tests/launchers/test_kinds.py` checks that both
registries name the same engines.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import get_args

from recall_eval.types import Engine, Profile


@dataclass(frozen=True)
class EngineFacts:
    """What a run can say about a server of this engine without asking the launchers."""

    launched: bool  # the harness starts the server (False: it is reached at the profile's base_url)
    summary: str  # one line, for `profiles` and the frame's column docs


ENGINES: dict[Engine, EngineFacts] = {
    "reference": EngineFacts(launched=True, summary="the bundled DSA reference engine (CPU)"),
    "sglang": EngineFacts(launched=True, summary="SGLang (python -m sglang.launch_server)"),
    "vllm": EngineFacts(launched=True, summary="vLLM (vllm serve), from its own environment"),
    "external": EngineFacts(launched=False, summary="a running server at --base-url"),
}
assert set(ENGINES) == set(get_args(Engine)), "every Engine has its facts"

ENGINE_NAMES = ", ".join(ENGINES)


def launched(profile: Profile | None) -> bool:
    """True when the run starts this profile's server itself (its launch settings are facts)."""
    return profile is not None and ENGINES[profile.engine].launched
