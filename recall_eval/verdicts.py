"""A live answer's verdicts, as a run stores them: a scored case graded by its metric (one verdict), a
pass/miss case by both scoring rules (lenient and strict). One function for the runner and for
`recall-eval report --rescore`, so a re-scored run holds what a new run would.

SCORING_VERSION numbers the rules of recall_eval.scoring and recall_eval.metrics together: bump it with
any change that can turn a verdict or a score. It is part of the reuse key (a run scored under other
rules is not reused) and `report --rescore` brings a stored run's verdicts up to it.
"""

from __future__ import annotations

from dataclasses import dataclass

from recall_eval.metrics import score_metric
from recall_eval.scoring import ECHO_WORDS, PromptText, score_completion
from recall_eval.types import Case, Completion, Outcome

SCORING_VERSION = 1


@dataclass(frozen=True)
class Verdicts:
    outcome: Outcome  # lenient (Result.outcome)
    why: str | None  # why the lenient verdict is not a pass (Result.error)
    strict_outcome: Outcome
    strict_why: str | None  # why strict misses where lenient passed
    score: float | None  # scored cases: the metric's grade

    def stored(self) -> dict[str, object]:
        """The Result fields these verdicts fill."""
        return {
            "outcome": self.outcome,
            "error": self.why if self.outcome != "pass" else None,
            "strict_outcome": self.strict_outcome,
            "strict_why": self.strict_why,
            "score": self.score,
        }


def long_answer(completion: Completion) -> bool:
    """Long enough to echo the prompt: checking it reads the whole prompt (the runner does it off the loop)."""
    return len(completion.text.split()) >= ECHO_WORDS


def judge(case: Case, completion: Completion) -> Verdicts:
    """The verdicts of a live model's completion for `case`."""
    if case.metric is not None:
        outcome, why, score = score_metric(completion, case.metric, case.expected, case.params)
        return Verdicts(outcome, why, outcome, None, score)
    scored = score_completion(completion, case.expected, case.distractors, PromptText(case))
    strict_why = scored.strict_why if scored.outcome == "pass" else None
    return Verdicts(scored.outcome, scored.why, scored.strict_outcome, strict_why, None)
