"""A case's calibration digest (the key of calibration-cache.json entries) is the same as it always was:
sha256 of json.dumps([[role, content], ...], ensure_ascii=False), now built from orjson's string encoding
(recall_eval/calibration.py: _digest), so the caches of earlier runs keep matching on resume."""

from __future__ import annotations

import hashlib
import json

import pytest

from recall_eval.calibration import _digest
from recall_eval.types import ChatMessage
from suites import build_recipes

EVERY_BMP_CHARACTER = "".join(chr(c) for c in range(0x10000) if not 0xD800 <= c < 0xE000)


def _old_digest(messages: tuple[ChatMessage, ...]) -> str:
    text = json.dumps([[m.role, m.content] for m in messages], ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


@pytest.mark.parametrize(
    "contents",
    [
        [EVERY_BMP_CHARACTER],
        ["\U0001f600 \U0010ffff astral", '"quoted" \\ back\\slash \n\t\r\b\f \x00\x1f\x7f \u2028\u2029'],
        ["", "plain", "system prompt"],
    ],
)
def test_the_digest_equals_json_dumps_s(contents):
    roles = ["user", "assistant", "system"]
    messages = tuple(ChatMessage(role=roles[i % 3], content=c) for i, c in enumerate(contents))  # type: ignore[arg-type]
    assert _digest(messages) == _old_digest(messages)


def test_the_digest_of_rendered_prompts_is_unchanged():
    for suite in ("needle", "config", "multiturn"):
        for recipe in build_recipes(suite, [3000], [0.0, 50.0], 1, 11):
            case = recipe.render(recipe.words_guess(1.3))
            assert _digest(case.messages) == _old_digest(case.messages)
