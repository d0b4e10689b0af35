"""The external kind: a running server reached at base_url; nothing is started or checked locally."""

from __future__ import annotations

from typing import ClassVar

from launchers.argv.spec import LaunchSpec
from launchers.kinds.base import ServerKind
from recall_eval.errors import BadInput
from recall_eval.types import Engine, ExternalFields, Profile


class ExternalKind(ServerKind):
    name: ClassVar[Engine] = "external"
    fields_model = ExternalFields
    index_k_dtypes = ("fp8", "bf16", "fp4")  # not launched: the server's own, learned or unknown

    def check(self, profile: Profile, where: str) -> None:
        if not profile.base_url:
            raise BadInput(f"{where}: engine 'external' needs base_url (e.g. http://127.0.0.1:30000)")
        super().check(profile, where)

    def build(self, profile: Profile) -> list[LaunchSpec]:
        return []

    def plan_refusal(self, profile: Profile) -> str | None:
        return (
            f"profile {profile.name!r} is a running server (engine external): its memory is its own; "
            "plan a profile that recall-eval launches"
        )
