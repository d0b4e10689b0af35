"""A server kind: everything that differs between engines, in one object (see launchers/kinds/__init__.py).

A kind answers, for a profile of its engine: which profile fields it takes, which index-key precisions
it can launch (and why not the others), its processes (argv + env, pure), how readiness is probed,
which model name the server will list, how many GPUs it needs, its own preflight checks, which values
its log must have masked, and whether `plan` knows its memory model. The base class holds the common
behaviour; each engine overrides what it does differently.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import ClassVar

from pydantic import BaseModel

from launchers.argv.spec import LaunchSpec
from launchers.cell_plan import not_planned
from launchers.log_mask import launch_secrets
from launchers.readiness import Probe
from recall_eval.engines import ENGINES, EngineFacts
from recall_eval.errors import BadInput
from recall_eval.study_store import CellPlan
from recall_eval.types import Engine, IndexKDtype, Profile, ServerFields

COMMON_FIELDS = frozenset(ServerFields.model_fields)  # every kind takes them (naming, host, port, ...)

# why a field belongs to one kind, said when another kind is given it
FIELD_NOTES = {"fault": "a fault is planted in the reference engine only"}


class ServerKind:
    """One engine's behaviour. Subclasses set the class attributes and override what differs."""

    name: ClassVar[Engine]
    # its profile fields beyond COMMON_FIELDS, typed and with their defaults: one of Profile's bases in
    # recall_eval/types.py (the core stores profiles, so their fields are declared there)
    fields_model: ClassVar[type[BaseModel]]
    # index-key precisions it can launch; any other is refused with `precision_refusal`
    index_k_dtypes: ClassVar[tuple[IndexKDtype, ...]] = ("fp8",)
    precision_refusal: ClassVar[str] = ""  # why the others cannot be launched, and what to do instead
    topk_setting: ClassVar[str] = ""  # how index_topk reaches the server (shown by `profiles`)
    # how the server counts a prompt's tokens (recall_eval.tokenization's name of the way that answers)
    length_endpoint: ClassVar[str] = ""
    # preflight imports the engine's module for real (seconds) rather than only finding it
    import_to_check: ClassVar[bool] = True

    @property
    def facts(self) -> EngineFacts:
        return ENGINES[self.name]

    @property
    def fields(self) -> frozenset[str]:
        """The names of the profile fields it takes beyond COMMON_FIELDS."""
        return frozenset(self.fields_model.model_fields)

    def check(self, profile: Profile, where: str) -> None:
        """Rules a field's type cannot express, checked when a profile is read: only its own fields set."""
        defaults = Profile.model_fields
        foreign = sorted(
            name
            for name in set(Profile.model_fields) - COMMON_FIELDS - self.fields
            if getattr(profile, name) != defaults[name].get_default(call_default_factory=True)
        )
        if foreign:
            why = "".join(f" ({FIELD_NOTES[name]})" for name in foreign if name in FIELD_NOTES)
            raise BadInput(f"{where}: engine {self.name} does not take {', '.join(foreign)}{why}; drop them")

    def check_precision(self, profile: Profile, where: str) -> None:
        """An index-key precision it can launch; checked when a profile is chosen (with its overrides)
        or built, so that `profiles` still lists one it cannot launch, saying why."""
        if "index_k_dtype" in self.fields and profile.index_k_dtype not in self.index_k_dtypes:
            raise BadInput(
                f"{where}: engine {self.name} cannot launch index_k_dtype {profile.index_k_dtype} "
                f"(it launches {', '.join(self.index_k_dtypes)}): {self.precision_refusal}"
            )

    def build(self, profile: Profile) -> list[LaunchSpec]:
        """The processes to start, in start order (pure: reads only the profile)."""
        raise NotImplementedError

    def expected_model(self, profile: Profile) -> str | None:
        """The model id the server will list in /v1/models (None: whatever it lists)."""
        return profile.served_model_name

    def probe(self, base_url: str, model: str | None) -> Probe:
        """The readiness check of a started server."""
        return Probe(base_url, model=model)

    def gpus_needed(self, profile: Profile) -> int:
        return 0

    def cluster_gpus(self, profile: Profile) -> int:
        """The GPUs a cluster executor reserves for one server of this profile (launchers/ray_cluster):
        what the server uses, which is what gpus_needed checks on this machine."""
        return self.gpus_needed(profile)

    def rank_specs(
        self, profile: Profile, nnodes: int, node_rank: int, dist_init_addr: str
    ) -> list[LaunchSpec]:
        """The process one node starts for a server spread over `nnodes` nodes (rank 0 answers HTTP).
        Only engines with a multi-node form override this."""
        raise BadInput(
            f"profile {profile.name!r}: engine {self.name} has no multi-node form; give it at most the GPUs "
            "of one node (tp)"
        )

    def preflight(self, profile: Profile, specs: Sequence[LaunchSpec], full: bool) -> list[str]:
        """The engine's own checks (importable, parser accepts the argv ...), one line per failure.
        full: nothing else has failed, so slow checks (importing the engine) are worth running."""
        return []

    def log_secrets(self, argv: Sequence[str], env: Mapping[str, str]) -> list[str]:
        """Values its server log must never show (masked as the log is written): secret-named flags'
        and environment variables' values."""
        return launch_secrets(argv, env)

    def plan_cell(self, profile: Profile, prompt_tokens: int, answer_tokens: int) -> CellPlan:
        """A study cell's memory plan before launch (launchers/cell_plan.py); not planned by default."""
        return not_planned(profile, prompt_tokens, answer_tokens)

    def plan_refusal(self, profile: Profile) -> str | None:
        """None when `plan` knows this engine's memory model; else the one line that says why not."""
        return None


def check_parts(profile: Profile, where: str) -> None:
    """A multi-server profile: one router, and prefill + decode parts (PD) or worker parts (data-parallel)."""
    if not profile.pd:
        return
    roles = [part.role for part in profile.pd]
    pd_shape = "prefill" in roles and "decode" in roles and "worker" not in roles
    dp_shape = "worker" in roles and "prefill" not in roles and "decode" not in roles
    if roles.count("router") != 1 or not (pd_shape or dp_shape):
        raise BadInput(
            f"{where}: a multi-server profile needs exactly one router and either prefill and decode "
            f"parts (PD) or worker parts (data-parallel), got {roles}"
        )
