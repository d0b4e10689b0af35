"""A config-aware vocabulary without a from-scratch run: extend the shipped BPE, grow the embeddings.

The shipped tokenizer was trained on needle chats only, so a config line costs 21-43 tokens
(`pool_timeout` and `FALLBACK` split into short pieces): a 128-token sliding window then holds three
or four entries and a path the model must match spans six blocks of the indexer. Training a new
tokenizer would mean training the model from scratch (the needle recipe alone needed ~5,000 steps).
Instead:

- `extend_tokenizer` learns BPE merges on config documents and APPENDS them (lowest priority) to the
  shipped merges, with their tokens after the shipped ids: every shipped token keeps its id, and text
  the new merges do not touch keeps its tokenization;
- `grow_embeddings` gives the model the larger vocabulary: shipped rows unchanged, each new row the
  mean of the rows of the pieces the shipped tokenizer splits the new token into (tied embeddings, so
  the output head starts by predicting a new token where it predicted its first pieces).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable
from pathlib import Path

from tokenizers import Tokenizer

from launchers.reference.config import ModelConfig
from launchers.reference.model import ReferenceModel


def _is_code_piece(token: str) -> bool:
    """Capital letters only (after the byte-level space mark): merges like "ME" would change how code
    values such as OMEGA tokenize, which the needle skill relies on (one letter per token)."""
    letters = token.lstrip("Ġ")
    return letters.isalpha() and letters.isupper()


def extend_tokenizer(base: Path, texts: Iterable[str], n_new: int) -> Tokenizer:
    """The base tokenizer plus up to n_new merges continuing BPE on `texts`: words are split by the base
    tokenizer first (its merges keep priority, exactly as the extended tokenizer applies them), then
    the most frequent adjacent pair is merged, repeatedly. Merges into capital-only tokens are skipped."""
    data = json.loads(base.read_text())
    vocab: dict[str, int] = data["model"]["vocab"]
    merges: list = data["model"]["merges"]
    tok = Tokenizer.from_str(json.dumps(data))
    words: Counter[str] = Counter()
    for text in texts:
        words.update(w for w, _ in tok.pre_tokenizer.pre_tokenize_str(text))
    pieces = {w: [t.value for t in tok.model.tokenize(w)] for w in words}
    next_id = max(vocab.values()) + 1
    for _ in range(n_new):
        pairs: Counter[tuple[str, str]] = Counter()
        for word, parts in pieces.items():
            for pair in zip(parts, parts[1:], strict=False):
                pairs[pair] += words[word]
        best = next(
            (
                p
                for p, _ in pairs.most_common()
                if p[0] + p[1] not in vocab and not _is_code_piece(p[0] + p[1])
            ),
            None,
        )
        if best is None:
            break
        merged = best[0] + best[1]
        merges.append(list(best))
        vocab[merged] = next_id
        next_id += 1
        for word, parts in pieces.items():
            out, i = [], 0
            while i < len(parts):
                if i + 1 < len(parts) and (parts[i], parts[i + 1]) == best:
                    out.append(merged)
                    i += 2
                else:
                    out.append(parts[i])
                    i += 1
            pieces[word] = out
    return Tokenizer.from_str(json.dumps(data))


def grow_embeddings(model: ReferenceModel, old: Tokenizer, new: Tokenizer, vocab_size: int) -> ReferenceModel:
    """A copy of `model` with `vocab_size` embedding rows (ids the old tokenizer has keep their row)."""
    if vocab_size <= model.cfg.vocab_size:
        return model
    cfg = ModelConfig(**{**model.cfg.__dict__, "vocab_size": vocab_size})
    grown = ReferenceModel(cfg)
    state = model.state_dict()
    old_rows = state["embed.weight"]
    rows = grown.embed.weight.detach().clone()
    rows[: old_rows.shape[0]] = old_rows
    for token, token_id in new.get_vocab().items():
        if old.token_to_id(token) is not None:  # a shipped token (new ids may fill old padding rows)
            continue
        text = new.decode([token_id])
        pieces = old.encode(text, add_special_tokens=False).ids
        rows[token_id] = old_rows[pieces].mean(0)
    state["embed.weight"] = rows
    grown.load_state_dict(state)
    return grown.to(next(model.parameters()).device)


def save_tokenizer(tok: Tokenizer, out: Path) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    tok.save(str(out))
    print(f"tokenizer: {tok.get_vocab_size()} tokens -> {out}")


def padded_vocab(tok_size: int) -> int:
    return -(-tok_size // 64) * 64
