"""How outcomes and numbers read in reports (shared by the heatmap and the HTML)."""

from __future__ import annotations

from recall_eval.types import Outcome

OUTCOME_LABELS: dict[Outcome, str] = {
    "pass": "pass",
    "miss": "miss",
    "empty": "empty",
    "truncated": "truncated",
    "too_long": "too long",
    "oom": "OOM",
    "crash": "crash",
    "timeout": "timeout",
    "error": "error",
    "not_applicable": "N/A",
}

OUTCOME_MEANINGS: dict[Outcome, str] = {
    "pass": "the answer contains the expected value",
    "miss": "the model answered, without the expected value",
    "empty": "the model returned no answer text",
    "truncated": "the answer hit the token budget before giving the value",
    "too_long": "the prompt exceeded the server's context length",
    "oom": "the server ran out of memory",
    "crash": "the server died for another reason",
    "timeout": "no complete answer within the request timeout",
    "error": "the request failed (HTTP or client error)",
    "not_applicable": "the suite's smallest prompt is longer than the cell's length; not sent",
}


def outcome_label(outcome: Outcome) -> str:
    return OUTCOME_LABELS[outcome]
