"""Training-data transforms: random code values and key names, batches of answer targets."""

from __future__ import annotations

import random
import re

import numpy as np

from launchers.reference.training.train_data import (
    CODE_RE,
    Sample,
    make_batch,
    randomize_key,
    randomize_value,
)

MESSAGES = [
    {"role": "user", "content": "Fog. The secret code for the Sundial archive is ROBIN-1158-FINCH. Rain.\n\n"
     "What is the secret code for the Sundial archive? Answer with the code only."}
]  # fmt: skip
KEY_RE = re.compile(r"\b([A-Z][a-z]+) (?:vault|archive|server)\b")


def test_random_value_replaces_every_occurrence() -> None:
    rng = random.Random(0)
    for _ in range(50):
        messages, answer = randomize_value(MESSAGES, "ROBIN-1158-FINCH", rng, forbidden={"ZEBRA", "ELM"})
        assert CODE_RE.fullmatch(answer) and answer != "ROBIN-1158-FINCH"
        assert "ROBIN" not in messages[0]["content"] and messages[0]["content"].count(answer) == 1
        assert not {"ZEBRA", "ELM"} & set(answer.split("-"))


def test_random_key_name_replaces_the_asked_name_everywhere() -> None:
    rng = random.Random(1)
    messages = randomize_key(MESSAGES, KEY_RE, rng, forbidden=set())
    content = messages[0]["content"]
    assert "Sundial" not in content
    names = KEY_RE.findall(content)
    assert len(names) == 2 and names[0] == names[1]


def test_batch_targets_are_the_next_tokens() -> None:
    samples = [Sample(np.arange(10, 30, dtype=np.int32), 15), Sample(np.arange(40, 52, dtype=np.int32), 9)]
    batch = make_batch(samples, n_lm=4, rng=np.random.default_rng(0), pad_id=0)
    assert batch.tokens.shape == (2, 20)
    for i, s in enumerate(samples):
        valid = batch.targets[i] != -100
        pos, tgt, ans = batch.qpos[i][valid], batch.targets[i][valid], batch.is_answer[i][valid]
        assert (batch.tokens[i, pos + 1] == tgt).all()
        assert pos[ans].tolist() == list(range(s.answer_start - 1, len(s.ids) - 1))
        assert (pos[~ans] < s.answer_start - 1).all() and int((~ans).sum()) == 4
