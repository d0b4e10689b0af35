"""Training-data transforms: random code values and key names, batches of answer targets."""

from __future__ import annotations

import random
import re

import numpy as np

from launchers.reference.training.train_data import (
    CODE_RE,
    Sample,
    make_batch,
    randomize_all_codes,
    randomize_all_keys,
    randomize_services,
)

MESSAGES = [
    {"role": "user", "content": "Fog. The secret code for the Sundial archive is ROBIN-1158-FINCH. Rain.\n\n"
     "What is the secret code for the Sundial archive? Answer with the code only."}
]  # fmt: skip
KEY_RE = re.compile(r"\b([A-Z][a-z]+) (?:vault|archive|server)\b")


TWO_FACTS = [
    {"role": "user", "content": "The Sundial archive uses the code ROBIN-1158-FINCH. The archive is old."},
    {"role": "assistant", "content": "Noted the Sundial archive code."},
    {
        "role": "user",
        "content": "The Falcon vault uses WREN-2222-OAK.\n\nWhat is the code for the Sundial archive?",
    },
]


def test_every_code_gets_its_own_random_code_so_none_marks_the_answer() -> None:
    rng = random.Random(0)
    for _ in range(50):
        messages, answer = randomize_all_codes(TWO_FACTS, "ROBIN-1158-FINCH", rng, forbidden={"ZEBRA", "ELM"})
        text = "\n".join(m["content"] for m in messages)
        codes = CODE_RE.findall(text)
        assert len(codes) == 2 and answer == codes[0] and codes[0] != codes[1]
        assert "ROBIN" not in text and "WREN" not in text
        assert not {"ZEBRA", "ELM"} & {w for c in codes for w in c.split("-")}


def test_every_pool_key_name_is_replaced_consistently_and_other_capitals_stay() -> None:
    messages = randomize_all_keys(TWO_FACTS, KEY_RE, {"Sundial", "Falcon"}, random.Random(1), forbidden=set())
    text = "\n".join(m["content"] for m in messages)
    assert "Sundial" not in text and "Falcon" not in text and "The archive is old" in text
    names = KEY_RE.findall(text)
    asked = names[-1]
    assert names.count(asked) == 3 and len(set(names)) == 3  # Sundial x3 -> one name; Falcon -> another


def test_service_names_are_replaced_in_every_spelling_of_a_config_document() -> None:
    doc = [{"role": "user", "content": "# tickets_api\nTICKETS_API_PRIMARY_PORT=12345\nname: tickets-api\n"
            "app: tickets\nticketsx stays\n\nWhat is TICKETS_API_PRIMARY_PORT?"}]  # fmt: skip
    text = randomize_services(doc, {"tickets", "forum"}, random.Random(2), forbidden=set())[0]["content"]
    new = text.split("\n")[0].removeprefix("# ").removesuffix("_api")
    assert new != "tickets" and new.islower()
    assert (
        text.count(f"{new.upper()}_API_PRIMARY_PORT") == 2 and f"{new}-api" in text and f"app: {new}" in text
    )
    assert "ticketsx stays" in text and "12345" in text


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
