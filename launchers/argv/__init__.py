"""Pure builders of the processes a profile starts: argv + env + role + port, one LaunchSpec each.

build_command(profile) starts nothing and reads nothing but the profile, so every engine's
command line is testable without a GPU (tests parse them with SGLang's own parser).
"""

from __future__ import annotations

from launchers.argv.precision import BF16_INDEX_K_ENV, BF16_PATCH_DIR
from launchers.argv.reference import reference_spec, reference_worker_specs
from launchers.argv.router import router_spec
from launchers.argv.sglang import pd_server_specs, single_server_spec
from launchers.argv.spec import LaunchSpec
from recall_eval.errors import BadInput
from recall_eval.types import Profile


def build_command(profile: Profile) -> list[LaunchSpec]:
    """The processes to start, in start order; the last one with is_endpoint is what clients use.

    reference: one server. sglang: one server, or prefill + decode servers + router (PD).
    external: nothing to start.
    """
    if profile.fault is not None and profile.engine != "reference":
        raise BadInput(
            f"profile {profile.name!r}: fault={profile.fault} is planted in the reference engine only, "
            f"not in engine {profile.engine!r}"
        )
    if profile.engine == "external":
        return []
    if profile.engine == "reference":
        if profile.pd:  # data-parallel reference workers behind sglang_router
            return [*reference_worker_specs(profile), router_spec(profile)]
        return [reference_spec(profile)]
    if profile.pd:
        return [*pd_server_specs(profile), router_spec(profile)]
    return [single_server_spec(profile)]


__all__ = ["BF16_INDEX_K_ENV", "BF16_PATCH_DIR", "LaunchSpec", "build_command"]
