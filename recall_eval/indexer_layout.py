"""Which IndexerLayout a server's meta_info.indexer_topk has (see recall_eval/indexer_coverage.py for the facts).

Resolved once per run, from what the server says about itself plus one probe request:

- the reference engine reports num_indexer_layers, index_topk, its block size and local window in
  /server_info;
- an SGLang server reports its architecture in /model_info: DeepSeek-V4 (compressed blocks of 4 with
  overlap, 128-token sliding window) or a DSA model such as DeepSeek-V3.2 (token positions, or physical
  KV slots under the default fused top-k, told apart from the probe's last prompt row: with a prompt
  shorter than index_topk every position is selected, so positions give exactly {0..P-1} while slots
  never include SGLang's reserved slot 0);
- index_topk comes from the server's --json-model-override-args, the profile, the model's config.json,
  or the published default of the architecture, in that order; the number of indexer layers is what
  the probe's row width leaves (values per row / index_topk), checked against config.json when known.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Literal

import numpy as np

from recall_eval.errors import UserError
from recall_eval.indexer_coverage import IndexerLayout

Family = Literal["reference", "dsa", "v4"]

# SGLang 0.5.23's is_deepseek_dsa / is_deepseek_v4 (srt/configs/model_config.py:191-212, 395-400).
DSA_ARCHITECTURES = frozenset(
    {
        "DeepseekV3ForCausalLM",
        "DeepseekV32ForCausalLM",
        "DeepseekV3ForCausalLMNextN",
        "MistralLarge3ForCausalLM",
        "PixtralForConditionalGeneration",
        "GlmMoeDsaForCausalLM",
        "GlmMoeDsaForCausalLMNextN",
        "Glm5NextForConditionalGenerationNextN",
        "Glm5NextForConditionalGeneration",
        "LongcatFlashForCausalLM",
        "LongcatFlashForCausalLMNextN",
        "Dots3NoteForCausalLM",
        "Dots3NoteForCausalLMNextN",
        "HYV4ForCausalLM",
        "HYV4ForCausalLMNextN",
    }
)
V4_ARCHITECTURES = frozenset(
    {"DeepseekV4ForCausalLM", "DeepseekV4ForCausalLMNextN", "DeepseekV4ForCausalLMDSpark"}
)
# Published config.json values (deepseek-ai/DeepSeek-V3.2: index_topk 2048; DeepSeek-V4-Flash:
# index_topk 512, sliding_window 128), used only when neither the server nor config.json says.
DEFAULT_INDEX_TOPK: dict[Family, int] = {"dsa": 2048, "v4": 512}
V4_BLOCK = 4
V4_DEFAULT_WINDOW = 128


class LayoutError(UserError):
    """The harness cannot tell how to read the server's indexer selections."""


def family_of(server_info: Mapping[str, Any], model_info: Mapping[str, Any]) -> Family:
    # the reference engine's /server_info describes its block layout itself (num_indexer_layers and
    # indexer_block_size); SGLang's says neither, so its model's architecture decides
    self_described = "num_indexer_layers" in server_info and "indexer_block_size" in server_info
    if self_described or model_info.get("model_type") == "reference_dsa":
        return "reference"
    architectures = model_info.get("architectures") or []
    if any(a in V4_ARCHITECTURES for a in architectures):
        return "v4"
    if any(a in DSA_ARCHITECTURES for a in architectures):
        return "dsa"
    name = ", ".join(architectures) or str(model_info.get("model_type") or "unknown")
    raise LayoutError(
        f"--capture-indexer: the server's model ({name}) is not a DSA or DeepSeek-V4 model known to return "
        f"indexer top-k; drop --capture-indexer"
    )


def _override_topk(server_info: Mapping[str, Any]) -> int | None:
    text = server_info.get("json_model_override_args")
    if not isinstance(text, str) or not text.strip():
        return None
    try:
        value = json.loads(text).get("index_topk")
    except (ValueError, AttributeError):
        return None
    return value if isinstance(value, int) and value > 0 else None


def index_topk_of(
    family: Family,
    server_info: Mapping[str, Any],
    profile_topk: int | None,
    model_config: Mapping[str, Any] | None,
) -> tuple[int, str]:
    """index_topk and where it came from."""
    if (value := _override_topk(server_info)) is not None:
        return value, "server --json-model-override-args"
    if profile_topk is not None:
        return profile_topk, "profile index_topk"
    if model_config and isinstance(model_config.get("index_topk"), int):
        return int(model_config["index_topk"]), "model config.json"
    if family == "reference":
        raise LayoutError("the reference server did not report index_topk in /server_info")
    return DEFAULT_INDEX_TOPK[family], f"published default for {family}"


def _config_layers(family: Family, model_config: Mapping[str, Any] | None) -> int | None:
    if not model_config:
        return None
    if family == "v4":
        ratios = model_config.get("compress_ratios")
        layers = model_config.get("num_hidden_layers")
        if isinstance(ratios, list) and isinstance(layers, int):
            return sum(
                1 for r in ratios[:layers] if r == 4
            )  # MTP entries past num_hidden_layers have no slot
        return None
    layers = model_config.get("num_hidden_layers")
    return layers if isinstance(layers, int) else None


def dsa_entries_are_positions(last_row: np.ndarray, prompt_tokens: int) -> bool:
    """The probe's last prompt row (layers, topk) of a DSA model: positions {0..P-1} in every layer?

    With index_topk below the probe's length only a subset can be checked: topk values, all below P."""
    wanted = set(range(prompt_tokens))
    topk = last_row.shape[-1]
    for layer in last_row:
        chosen = {int(v) for v in layer if v >= 0}
        if chosen != wanted and not (topk < prompt_tokens and len(chosen) == topk and chosen <= wanted):
            return False
    return True


def resolve_layout(
    server_info: Mapping[str, Any],
    model_info: Mapping[str, Any],
    probe_last_row: np.ndarray,
    probe_prompt_tokens: int,
    profile_topk: int | None = None,
    model_config: Mapping[str, Any] | None = None,
) -> IndexerLayout:
    """The layout, given the probe's last prompt row (flat: num_indexer_layers x index_topk values)."""
    values_per_row = int(probe_last_row.size)
    family = family_of(server_info, model_info)
    if family == "reference":
        layers, topk = server_info.get("num_indexer_layers"), server_info.get("index_topk")
        if not isinstance(layers, int) or not isinstance(topk, int) or layers * topk != values_per_row:
            raise LayoutError(
                f"the reference server's /server_info (num_indexer_layers={layers}, index_topk={topk}) does not "
                f"match its indexer_topk rows of {values_per_row} values"
            )
        block = server_info.get("indexer_block_size") or V4_BLOCK
        window = server_info.get("indexer_local_window") or 0
        return IndexerLayout(
            n_layers=layers,
            index_topk=topk,
            kind="block",
            tokens_per_entry=int(block),
            local_window=int(window),
            window_align=int(block),
            source="reference /server_info",
        )
    topk, topk_source = index_topk_of(family, server_info, profile_topk, model_config)
    if values_per_row % topk:
        raise LayoutError(
            f"indexer_topk rows have {values_per_row} values, not a multiple of index_topk {topk} ({topk_source}); "
            "set index_topk in the profile to the server's value"
        )
    layers = values_per_row // topk
    expected = _config_layers(family, model_config)
    if expected is not None and expected != layers:
        raise LayoutError(
            f"indexer_topk rows hold {layers} layers of index_topk {topk} ({topk_source}) but config.json has "
            f"{expected} indexer layers; set index_topk in the profile to the server's value"
        )
    source = f"{family}: index_topk from {topk_source}, {layers} layers from the row width"
    if family == "v4":
        window = (model_config or {}).get("sliding_window")
        return IndexerLayout(
            n_layers=layers,
            index_topk=topk,
            kind="block",
            tokens_per_entry=V4_BLOCK,
            overlap_entries=1,
            local_window=int(window) if isinstance(window, int) else V4_DEFAULT_WINDOW,
            source=source,
        )
    if not dsa_entries_are_positions(probe_last_row.reshape(layers, topk), probe_prompt_tokens):
        raise LayoutError(
            "the server returns physical KV slots as indexer top-k (SGLang's fused DSA top-k), which cannot be "
            "mapped to token positions; restart it with SGLANG_DSA_FUSE_TOPK=0 in its environment"
        )
    return IndexerLayout(n_layers=layers, index_topk=topk, kind="token", source=source)
