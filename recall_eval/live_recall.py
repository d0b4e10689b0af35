"""Recall so far, per suite, while a sweep runs: what the progress line shows beside the counts.

Counted as the report counts (recall_eval.stats.recall_table): passes over answers from a live model
(pass, miss, empty, truncated; the lenient verdict), infrastructure outcomes left out, scored suites
(a metric's grade) left out. The interval is the 95% Wilson interval of the cases finished so far;
cases run trial by trial, each in grid order (shorter lengths first), so it describes those cases, not
the whole grid yet.
Light on purpose (scipy is imported on the first answer): the progress display imports it.
"""

from __future__ import annotations

from recall_eval.types import RECALL_OUTCOMES, Result


class LiveRecall:
    def __init__(self) -> None:
        self.counts: dict[str, list[int]] = {}  # suite -> [passes, answered]

    def add(self, result: Result) -> None:
        if result.score is not None or result.params.get("metric") or result.outcome not in RECALL_OUTCOMES:
            return
        passes, answered = self.counts.setdefault(result.suite, [0, 0])
        self.counts[result.suite] = [passes + (result.outcome == "pass"), answered + 1]

    def text(self) -> str:
        """e.g. 'needle 92% [65-99] config 50% [24-76]' (empty before the first answer)."""
        from recall_eval.stats import wilson_interval

        parts = []
        for suite, (passes, answered) in self.counts.items():
            low, high = wilson_interval(passes, answered) or (0.0, 0.0)
            parts.append(f"{suite} {100 * passes / answered:.0f}% [{100 * low:.0f}-{100 * high:.0f}]")
        return " ".join(parts)
