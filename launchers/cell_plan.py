"""A study cell's memory plan before launch: KV slots, how many of the study's longest requests fit at
once, and fit or not, with the reason (recall_eval.study_store.CellPlan).

- The reference engine: its pool (launchers/reference/kv_pool.py) holds max_total_tokens slots (else
  context_length, else the bundled model's), each costing the bytes of every layer's K and V (bf16) plus
  one index key per 4-token page per DSA layer (fp8 + fp32 scale, or bf16); a request is refused when its
  prompt reaches min(context, pool) - 6 tokens or prompt + answer passes the context
  (launchers/reference/request_limits.py, SGLang's rules); with memory_limit_gb, weights + pool must fit
  under the cap or the server dies at start.
- SGLang with a DeepSeek-V4 / V3.2 config: launchers.planner.make_plan at the longest request.
- Anything else (another engine, a model without a known config): not planned; launched as asked.
"""

from __future__ import annotations

from pathlib import Path

from launchers.planner import GIB, make_plan
from recall_eval.errors import BadInput
from recall_eval.study_store import CellPlan
from recall_eval.types import Profile

_REFERENCE_WEIGHTS = Path(__file__).parent / "reference" / "weights"
_SGLANG_ROOM = 6  # SGLang refuses a prompt of max_req_len - 5 tokens or more: max_req_len = limit - 1


def _reference_bytes_per_slot(config: dict, index_k_dtype: str) -> float:
    """Bytes per KV slot of the reference engine's pool (the same tensors launchers.reference.kv_pool makes)."""
    heads, d_model = int(config.get("n_heads", 4)), int(config.get("d_model", 256))
    layers = int(config.get("n_swa_layers", 4)) + int(config.get("n_dsa_layers", 2))
    kv = layers * 2 * heads * (d_model // heads) * 2  # K and V, bf16
    ratio, index_dim = int(config.get("compress_ratio", 4)), int(config.get("index_head_dim", 128))
    per_page = index_dim * (1 if index_k_dtype == "fp8" else 2) + (4 if index_k_dtype == "fp8" else 0)
    return kv + int(config.get("n_dsa_layers", 2)) * per_page / ratio


def plan_reference(profile: Profile, prompt_tokens: int, answer_tokens: int) -> CellPlan:
    import json

    weights = Path(profile.model_path) if profile.model_path else _REFERENCE_WEIGHTS
    config = json.loads((weights / "config.json").read_text())
    ratio = int(config.get("compress_ratio", 4))
    context = profile.context_length or int(config.get("context_length", 32768))
    slots = -(-(profile.max_total_tokens or context) // ratio) * ratio
    per_slot = _reference_bytes_per_slot(config, profile.index_k_dtype)
    per_token = float(int(per_slot * slots) // slots)  # the server reports the floor
    need = prompt_tokens + answer_tokens
    common = {
        "kv_slots": slots,
        "kv_bytes_per_token": per_token,
        "sequence_tokens": need,
        "max_sequences": slots // need,
        "source": str(weights / "config.json"),
    }
    limit = min(context, slots) - _SGLANG_ROOM
    if prompt_tokens >= limit:
        return CellPlan(
            fits=False,
            reason=f"a {prompt_tokens:,}-token prompt does not fit: context {context:,}, KV pool {slots:,} "
            f"tokens (prompts up to {limit - 1:,}); raise ctx= or shorten --lengths",
            **common,
        )
    if need > context:
        return CellPlan(
            fits=False,
            reason=f"{prompt_tokens:,} prompt + {answer_tokens} answer tokens pass the {context:,}-token context",
            **common,
        )
    if profile.memory_limit_gb is not None:
        model_bytes = sum(path.stat().st_size for path in weights.glob("*.safetensors"))
        total = model_bytes + per_slot * slots
        if total > profile.memory_limit_gb * GIB:
            return CellPlan(
                fits=False,
                reason=f"predicted OOM at start: weights {model_bytes / GIB:.2f} GiB + KV pool "
                f"{per_slot * slots / GIB:.2f} GiB exceed the {profile.memory_limit_gb:g} GiB memory cap",
                **common,
            )
    return CellPlan(
        fits=True,
        reason=f"fits: {slots // need:,} sequences of {need:,} tokens in a {slots:,}-token pool",
        **common,
    )


def plan_sglang(profile: Profile, prompt_tokens: int, answer_tokens: int) -> CellPlan:
    need = prompt_tokens + answer_tokens
    try:
        plan = make_plan(profile, context_length=need)
    except BadInput as err:
        return CellPlan(fits=None, reason=f"not planned: {err}", sequence_tokens=need)
    row = next(row for row in plan.rows if row.dtype == profile.index_k_dtype)
    common = {
        "kv_slots": row.max_tokens,
        "kv_bytes_per_token": row.kv_bytes_per_token,
        "sequence_tokens": need,
        "max_sequences": row.sequences,
        "source": plan.config_source,
    }
    if not row.available:
        return CellPlan(
            fits=False, reason=f"{row.dtype} index keys are not available for {plan.model}", **common
        )
    if plan.pool_gib <= 0:
        return CellPlan(
            fits=False, reason=f"predicted OOM: the weights leave no KV pool ({plan.notes[-1]})", **common
        )
    if profile.context_length is not None and need > profile.context_length:
        return CellPlan(
            fits=False,
            reason=f"{need:,} tokens (prompt + answer) pass the profile's {profile.context_length:,}-token context",
            **common,
        )
    if row.sequences < 1:
        return CellPlan(
            fits=False,
            reason=f"predicted OOM: one {need:,}-token sequence needs more than the {row.max_tokens:,}-token KV pool",
            **common,
        )
    return CellPlan(
        fits=True,
        reason=f"fits: {row.sequences:,} sequences of {need:,} tokens in a {row.max_tokens:,}-token pool",
        **common,
    )


def plan_cell(profile: Profile, prompt_tokens: int, answer_tokens: int) -> CellPlan:
    """The plan of a cell whose longest prompt is `prompt_tokens` server tokens with `answer_tokens` to
    answer: its server kind's (launchers/kinds: the reference engine's and SGLang's are above)."""
    from launchers.kinds import kind_of  # the kinds use this module's planners

    return kind_of(profile).plan_cell(profile, prompt_tokens, answer_tokens)


def not_planned(profile: Profile, prompt_tokens: int, answer_tokens: int) -> CellPlan:
    return CellPlan(
        fits=None,
        reason=f"not planned: the planner knows the reference engine and SGLang, not {profile.engine}",
        sequence_tokens=prompt_tokens + answer_tokens,
    )
