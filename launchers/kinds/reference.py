"""The reference kind: the bundled DSA engine (python -m launchers.reference.server), on CPU."""

from __future__ import annotations

from typing import ClassVar

from launchers.argv.reference import reference_spec, reference_worker_specs
from launchers.argv.router import router_spec
from launchers.argv.spec import LaunchSpec
from launchers.cell_plan import plan_reference
from launchers.kinds.base import ServerKind, check_parts
from launchers.reference.server_args import INDEX_K_DTYPES
from recall_eval.errors import BadInput
from recall_eval.study_store import CellPlan
from recall_eval.types import Engine, Profile, ReferenceFields


class ReferenceKind(ServerKind):
    name: ClassVar[Engine] = "reference"
    fields_model = ReferenceFields
    # the precisions its index-key store implements (its server's --index-k-dtype choices)
    index_k_dtypes = INDEX_K_DTYPES
    precision_refusal = "its index-key store (launchers/reference) implements no other"
    topk_setting = "--json-model-override-args {index_topk: N} (SGLang's flag)"
    length_endpoint = "server:/v1/tokenize"
    import_to_check = False  # our own engine: finding it is enough (importing it costs torch's start-up)

    def check(self, profile: Profile, where: str) -> None:
        if profile.pd and {part.role for part in profile.pd} - {"worker", "router"}:
            raise BadInput(
                f"{where}: PD parts need engine 'sglang' (the reference engine takes worker parts only), "
                "not 'reference'"
            )
        check_parts(profile, where)
        super().check(profile, where)

    def plan_cell(self, profile: Profile, prompt_tokens: int, answer_tokens: int) -> CellPlan:
        return plan_reference(profile, prompt_tokens, answer_tokens)

    def cluster_gpus(self, profile: Profile) -> int:
        # it runs on CPU, but on a cluster it stands for a GPU server: it reserves tp logical GPUs, so
        # placement and queueing are those of the engine it stands for
        return profile.tp

    def build(self, profile: Profile) -> list[LaunchSpec]:
        if profile.pd:  # data-parallel reference workers behind sglang_router
            return [*reference_worker_specs(profile), router_spec(profile)]
        return [reference_spec(profile)]
