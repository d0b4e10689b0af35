"""The registry of server kinds: one typed object per engine (as inspect_ai registers model providers).

    kind = kind_of(profile)              # the profile's ServerKind
    kind.check(profile, where)           # its fields and parts; kind.check_precision(profile, where)
    kind.build(profile)                  # its processes: argv + env, pure
    kind.probe(url, model), kind.preflight(profile, specs, full), kind.log_secrets(argv, env),
    kind.plan_refusal(profile), kind.plan_cell(profile, prompt_tokens, answer_tokens)

Every decision that depends on the engine is a method or attribute of its kind; nothing outside this
package tests an engine by its name. The core's own facts per engine (is it launched?) are
recall_eval/engines.py, which names the same engines. A new kind: a ServerKind subclass in a module
here, registered below; its name added to recall_eval.types.Engine and recall_eval.engines.ENGINES; its
profile fields one model in recall_eval/types.py (as VllmFields), named by its fields_model and added
to Profile's bases.
"""

from __future__ import annotations

from launchers.argv.spec import LaunchSpec
from launchers.kinds.base import ServerKind
from launchers.kinds.external import ExternalKind
from launchers.kinds.reference import ReferenceKind
from launchers.kinds.sglang import SglangKind
from launchers.kinds.vllm import VllmKind
from recall_eval.types import Engine, Profile

KINDS: dict[Engine, ServerKind] = {
    kind.name: kind for kind in (ReferenceKind(), SglangKind(), VllmKind(), ExternalKind())
}


def kind_of(profile: Profile) -> ServerKind:
    return KINDS[profile.engine]


def build_command(profile: Profile) -> list[LaunchSpec]:
    """The processes to start, in start order; the last one with is_endpoint is what clients use.
    Starts nothing and reads nothing but the profile (every argv is testable without a GPU)."""
    kind = kind_of(profile)
    kind.check(profile, f"profile {profile.name!r}")
    kind.check_precision(profile, f"profile {profile.name!r}")
    return kind.build(profile)


__all__ = ["KINDS", "LaunchSpec", "ServerKind", "build_command", "kind_of"]
