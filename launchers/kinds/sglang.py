"""The sglang kind: SGLang 0.5.23 (python -m sglang.launch_server), single, PD-disaggregated or
data-parallel behind sglang_router; bf16 index keys through the bundled patch."""

from __future__ import annotations

from typing import ClassVar

from launchers.argv.router import router_spec
from launchers.argv.sglang import pd_server_specs, rank_server_spec, single_server_spec
from launchers.argv.spec import LaunchSpec
from launchers.cell_plan import plan_sglang
from launchers.kinds.base import ServerKind, check_parts
from recall_eval.study_store import CellPlan
from recall_eval.types import Engine, Profile, SglangFields


class SglangKind(ServerKind):
    name: ClassVar[Engine] = "sglang"
    fields_model = SglangFields
    index_k_dtypes = ("fp8", "bf16", "fp4")  # bf16: the bundled patch; fp4: SGLang's own FP4 indexer
    topk_setting = "--json-model-override-args {index_topk: N}"
    length_endpoint = "server:/v1/tokenize"

    def check(self, profile: Profile, where: str) -> None:
        check_parts(profile, where)
        super().check(profile, where)

    def plan_cell(self, profile: Profile, prompt_tokens: int, answer_tokens: int) -> CellPlan:
        return plan_sglang(profile, prompt_tokens, answer_tokens)

    def build(self, profile: Profile) -> list[LaunchSpec]:
        if profile.pd:
            return [*pd_server_specs(profile), router_spec(profile)]
        return [single_server_spec(profile)]

    def expected_model(self, profile: Profile) -> str | None:
        return profile.served_model_name or profile.model_path  # SGLang lists its model by its path

    def gpus_needed(self, profile: Profile) -> int:
        if profile.pd:
            parts = [part for part in profile.pd if part.role != "router"]
            return max(part.base_gpu_id + (part.tp or profile.tp) for part in parts)
        return profile.tp

    def rank_specs(
        self, profile: Profile, nnodes: int, node_rank: int, dist_init_addr: str
    ) -> list[LaunchSpec]:
        if profile.pd:
            return super().rank_specs(profile, nnodes, node_rank, dist_init_addr)
        return [rank_server_spec(profile, nnodes, node_rank, dist_init_addr)]
