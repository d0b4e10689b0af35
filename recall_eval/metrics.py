"""Metric scores: answers graded as a fraction in [0, 1] (scored suites), not pass/miss.

Pass/miss suites (needle, config, multiturn) give recall through recall_eval.scoring. Suites whose
answer is graded by a published metric (RULER's tasks, MRCR-style coreference, a JSONL file that names
its metric) carry the metric's name in ``Case.metric``; this module is the one place those metrics are
defined, so a score here equals the published figure for the same prediction.

- ``string_match_all`` (RULER, every task but QA): the share of the references that appear in the
  prediction, case-insensitively, as substrings.
- ``string_match_part`` (RULER's QA tasks): 1 when any reference appears in the prediction
  (case-insensitively), else 0.
- ``mrcr`` (OpenAI MRCR): 0 unless the prediction starts with the required random prefix; else
  difflib's SequenceMatcher ratio between prediction and the true response, both without the prefix.

RULER cleans a prediction before scoring (scripts/eval/evaluate.py: strip, control characters become
newlines, strip again); ``ruler_prediction`` does the same, so scores match RULER's for the same text.
RULER reports a task's score as 100 x the mean over samples, rounded to 2 decimals: ``ruler_task_score``.

A scored case also gets an outcome, so that the infrastructure taxonomy still holds: ``pass`` when the
score is 1, ``truncated`` / ``empty`` as in recall_eval.scoring, ``miss`` otherwise. Reports show the
mean score for these suites, never their pass rate as recall.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from difflib import SequenceMatcher

from recall_eval.types import Completion, Outcome

_CONTROL = re.compile(r"[\x00-\x1f]")


def ruler_prediction(text: str) -> str:
    """A prediction as RULER's evaluation cleans it: stripped, control characters turned into newlines."""
    return _CONTROL.sub("\n", text.strip()).strip()


def string_match_all(prediction: str, references: Sequence[str]) -> float:
    """Share of references contained in the prediction (case-insensitive); 0 when there are none."""
    if not references:
        return 0.0
    lowered = prediction.lower()
    return sum(1.0 for ref in references if ref.lower() in lowered) / len(references)


def string_match_part(prediction: str, references: Sequence[str]) -> float:
    """1 when any reference is contained in the prediction (case-insensitive), else 0."""
    lowered = prediction.lower()
    return 1.0 if any(ref.lower() in lowered for ref in references) else 0.0


def mrcr_score(prediction: str, answer: str, prefix: str) -> float:
    """OpenAI MRCR's grade: 0 without the prefix at the very start, else the SequenceMatcher ratio of
    prediction and answer with the prefix removed from both."""
    if not prediction.startswith(prefix):
        return 0.0
    return float(SequenceMatcher(None, prediction.removeprefix(prefix), answer.removeprefix(prefix)).ratio())


def _mrcr(prediction: str, references: Sequence[str], params: dict) -> float:
    return mrcr_score(prediction, references[0] if references else "", str(params.get("prefix", "")))


# name -> (prediction, references, case params) -> score in [0, 1]
METRICS: dict[str, Callable[[str, Sequence[str], dict], float]] = {
    "string_match_all": lambda prediction, refs, _: string_match_all(ruler_prediction(prediction), refs),
    "string_match_part": lambda prediction, refs, _: string_match_part(ruler_prediction(prediction), refs),
    "mrcr": _mrcr,
}


def ruler_task_score(scores: Sequence[float]) -> float:
    """A RULER task's reported figure: 100 x the mean per-sample score, rounded to 2 decimals."""
    return round(sum(scores) / len(scores) * 100, 2) if scores else 0.0


def check_metric(name: str) -> None:
    """ValueError naming the known metrics, for a metric this module does not define."""
    if name not in METRICS:
        raise ValueError(f"unknown metric {name!r}; known metrics: {', '.join(sorted(METRICS))}")


def score_metric(
    completion: Completion, metric: str, expected: Sequence[str], params: dict
) -> tuple[Outcome, str | None, float]:
    """(outcome, reason when not a pass, score) of one live answer under a named metric."""
    check_metric(metric)
    score = METRICS[metric](completion.text, expected, params)
    if score >= 1.0:
        return "pass", None, score
    if completion.finish_reason == "length":
        return "truncated", f"answer budget (max_tokens) ran out; {metric} {score:.2f}", score
    if not completion.text.strip():
        return "empty", "blank answer", score
    return "miss", f"{metric} {score:.2f}", score
