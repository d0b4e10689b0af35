"""The config-aware vocabulary extension: shipped ids and code tokenization unchanged, config text
shorter, and a grown model that computes exactly what the shipped one did on shipped-token inputs."""

from __future__ import annotations

import torch
from tokenizers import Tokenizer

from launchers.reference.engine_api import WEIGHTS_DIR
from launchers.reference.model import ReferenceModel
from launchers.reference.training.corpus import config_texts
from launchers.reference.training.train import NEEDLE_TOKENIZER
from launchers.reference.training.vocab_extension import extend_tokenizer, grow_embeddings, padded_vocab

BASE = NEEDLE_TOKENIZER  # what stage 6 extended (the shipped tokenizer is that extension)
NEEDLE = "The Falcon vault is protected by the secret code ZEBRA-4492-OMEGA. What protects it?"
CONFIG = 'billing_cache.replica.read_timeout = 54321ms\nhost = "node-u8vcn.sa-east.internal"'


def _extended(n_new: int = 64) -> tuple[Tokenizer, Tokenizer]:
    return Tokenizer.from_file(str(BASE)), extend_tokenizer(BASE, config_texts(3, 60), n_new)


def test_extension_keeps_every_shipped_id_and_code_tokenization_and_shortens_config() -> None:
    old, new = _extended()
    assert new.get_vocab_size() == old.get_vocab_size() + 64
    new_vocab = new.get_vocab()
    assert all(new_vocab[token] == i for token, i in old.get_vocab().items())
    code_old = old.encode("ZEBRA-4492-OMEGA").tokens
    assert new.encode("ZEBRA-4492-OMEGA").tokens == code_old == list("ZEBRA-4492-OMEGA")
    assert len(new.encode(CONFIG).ids) < len(old.encode(CONFIG).ids)
    assert new.decode(new.encode(CONFIG).ids) == CONFIG


def test_grown_model_keeps_its_outputs_on_shipped_tokens() -> None:
    old, new = _extended(400)  # past the next multiple of 64: the embedding must grow
    model = ReferenceModel.load(WEIGHTS_DIR)
    size = padded_vocab(new.get_vocab_size())
    assert size > model.cfg.vocab_size
    grown = grow_embeddings(model, old, new, size).eval()
    ids = torch.tensor([old.encode(NEEDLE).ids])
    qpos = torch.arange(ids.shape[1] - 1)[None]
    with torch.no_grad():
        before, _ = model.forward_train(ids, qpos, None)
        after, _ = grown.forward_train(ids, qpos, None)
    assert after.shape[-1] == size
    shipped = old.get_vocab_size()  # the shipped padding rows beyond it now hold new tokens
    torch.testing.assert_close(after[..., :shipped], before[..., :shipped])
    for token_id in (
        shipped,
        new.get_vocab_size() - 1,
    ):  # the first new token (an old padding row) and the last
        pieces = old.encode(new.decode([token_id])).ids
        torch.testing.assert_close(grown.embed.weight[token_id], model.embed.weight[pieces].mean(0))
