"""Thinking runs: when a spec asks for reasoning, and the answer budget such a run gets by default.

Kept apart from connecting because the library decides the budget before any server is reached
(sweep and compare options), while the request knobs travel with the client (recall_eval.connect).
"""

from __future__ import annotations

from recall_eval.types import RunSpec

# The answer budget of a thinking run when the user gives none: reasoning and answer share it, and a
# DeepSeek-style model thinks for hundreds to a few thousand tokens before a one-line answer.
THINKING_MAX_TOKENS = 4096


def is_thinking_run(spec: RunSpec) -> bool:
    """Does the spec ask for reasoning (an effort, or a thinking switch turned on)?"""
    kwargs = spec.chat_template_kwargs or {}
    switched_on = any(kwargs.get(name) is True for name in ("thinking", "enable_thinking"))
    return bool(spec.reasoning_effort) or switched_on
