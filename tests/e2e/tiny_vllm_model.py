"""Build a tiny Llama model directory that vLLM can serve on CPU: random weights (seeded), the reference
engine's own tokenizer (tokenizer.json, 2048 tokens) and its chat template. No downloads.

    python tests/e2e/tiny_vllm_model.py OUT_DIR     # with a Python that has torch and transformers

Run by the vLLM tests with vLLM's own interpreter (its venv has both), so the harness's environment
needs neither. The answers are noise; what the tests check is that vLLM is launched, counts tokens
and answers, which a real model of any size does alike.
"""

from __future__ import annotations

import sys
from pathlib import Path

REFERENCE_TOKENIZER = (
    Path(__file__).resolve().parents[2] / "launchers" / "reference" / "weights" / "tokenizer.json"
)
# the reference engine's template (launchers/reference/tokenizer.py): <|role|>content<|end|>, then <|assistant|>
CHAT_TEMPLATE = (
    "{% for message in messages %}<|{{ message['role'] }}|>{{ message['content'] }}<|end|>{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>{% endif %}"
)
MAX_POSITIONS = 8192


def build(out: Path) -> None:
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    tokenizer = PreTrainedTokenizerFast(
        tokenizer_file=str(REFERENCE_TOKENIZER), eos_token="<|end|>", pad_token="<|pad|>"
    )
    tokenizer.chat_template = CHAT_TEMPLATE
    tokenizer.model_max_length = MAX_POSITIONS
    tokenizer.save_pretrained(out)
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=128,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=32,  # vLLM's CPU attention takes head sizes 32 to 512, not 16
        max_position_embeddings=MAX_POSITIONS,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=None,
        tie_word_embeddings=True,
        torch_dtype="float32",
    )
    torch.manual_seed(0)
    LlamaForCausalLM(config).save_pretrained(out)


if __name__ == "__main__":
    build(Path(sys.argv[1]))
