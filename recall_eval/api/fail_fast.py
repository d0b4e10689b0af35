"""--fail-fast: stop a gated sweep as soon as the recall so far shows it fails, keeping the error rate.

Looking at the results again and again would, with a fixed alpha at each look, fail a good candidate far
more often than alpha. So the looks are planned and the alpha is spent (a Bonferroni split of the
family-wise error rate, which holds whatever the looks' dependence): at most LOOKS looks, one each time
another tenth of the planned cases has finished. The last look is the final gate, at SIGNIFICANCE / 2;
the other half of SIGNIFICANCE is split evenly over the LOOKS - 1 interim looks. The chance that a
candidate as good as its baseline (or its threshold) is stopped or failed anywhere is then at most
SIGNIFICANCE, as without --fail-fast; the price is the final test's smaller alpha (a little less
power), the gain a bad candidate stopped after a fraction of its cases.

At an interim look a run stops when
- with --baseline: the paired test of recall_eval.baseline_gate (Holm over the suites) on the cases
  finished so far fails at the look's alpha; pairing makes this valid in whatever order cases run;
- with --fail-under: a suite's (or the overall) recall so far has a Wilson interval at the look's level
  whose upper end is below the threshold. Cases run trial by trial, each trial in grid order (shorter
  lengths first; recall_eval.api.preparing.build_recipes), so until the first trial is done the cases
  so far stand for the shorter lengths only: a candidate that fails at short lengths is stopped early,
  one that fails only at long lengths at the looks that reach them.
Scored suites take part in the baseline test; the threshold looks use pass/miss suites only.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from contextlib import AbstractContextManager
from types import TracebackType

import pandas as pd

from recall_eval.api.hooks import Hooks, NoteLevel, SweepProgress
from recall_eval.baseline_gate import baseline_tests
from recall_eval.errors import UserError
from recall_eval.exit_codes import EXIT_BELOW_GATE, RecallGate
from recall_eval.frame import frame_of, headline_frame, without_baselines
from recall_eval.stats import SIGNIFICANCE, recall_table, wilson_interval
from recall_eval.types import Case, Profile, Result

LOOKS = 10


def final_alpha(fail_fast: bool) -> float:
    """The alpha of the gate's final test: half of it is spent on the interim looks under --fail-fast."""
    return SIGNIFICANCE / 2 if fail_fast else SIGNIFICANCE


def interim_alpha() -> float:
    return SIGNIFICANCE / 2 / (LOOKS - 1)


class FailFastStop(UserError):
    """Raised from inside the run at the look that shows the gate fails: the run stops there."""

    def __init__(self, lines: Sequence[str], spent: int, planned: int, look: int):
        self.lines = tuple(lines)
        self.spent, self.planned, self.look = spent, planned, look
        super().__init__(
            f"--fail-fast stopped the gate at look {look} of {LOOKS}, after {spent} of {planned} cases",
            EXIT_BELOW_GATE,
        )


class Watch:
    """The looks of one run: fed every finished result, raises FailFastStop at a look that fails."""

    def __init__(
        self,
        planned: int,
        suites: Sequence[str],
        scoring: str,
        gate: RecallGate | None = None,
        baseline: pd.DataFrame | None = None,
        baseline_name: str = "",
        tolerance: float = 0.0,
    ):
        self.planned, self.suites, self.scoring = planned, tuple(suites), scoring
        self.gate, self.baseline, self.baseline_name, self.tolerance = (
            gate,
            baseline,
            baseline_name,
            tolerance,
        )
        self.results: dict[str, Result] = {}
        self.look = 0
        # interim looks after each tenth of the planned cases (the last tenth is the final gate)
        self.marks = [math.ceil(planned * k / LOOKS) for k in range(1, LOOKS)]

    def observe(self, result: Result) -> None:
        self.results[result.case_id] = result
        done = len(self.results)
        if self.look < len(self.marks) and done >= self.marks[self.look]:
            self.look += 1
            lines = self.failing()
            if lines:
                raise FailFastStop(lines, done, self.planned, self.look)

    def _frame(self) -> pd.DataFrame:
        return headline_frame(frame_of([(None, list(self.results.values()))]), self.scoring)  # type: ignore[arg-type]

    def failing(self) -> list[str]:
        """The lines of what fails at this look's alpha (empty: go on)."""
        alpha = interim_alpha()
        frame = self._frame()
        lines = []
        if self.baseline is not None:
            tests = baseline_tests(self.baseline, frame, self.suites, self.tolerance, alpha)
            lines += [test.line(self.baseline_name) for test in tests if test.worse]
        if self.gate is not None:
            gated = without_baselines(frame)  # a no-context baseline is never gated
            plain = gated[gated["metric"].isna()]
            scopes = [(suite, plain[plain["suite"] == suite], t) for suite, t in self.gate.per_suite.items()]
            if self.gate.overall is not None:
                scopes.append(("overall", plain, self.gate.overall))
            for name, part, threshold in scopes:
                row = recall_table(part).iloc[0] if len(part) else None
                if row is None or not row["answered"]:
                    continue
                bounds = wilson_interval(int(row["passes"]), int(row["answered"]), 1 - 2 * alpha)
                if bounds is not None and bounds[1] < threshold:
                    lines.append(
                        f"{name}: recall so far {row['recall']:.3f} ({int(row['passes'])}/{int(row['answered'])}), "
                        f"its {100 * (1 - 2 * alpha):.2f}% Wilson interval [{bounds[0]:.3f}, {bounds[1]:.3f}] "
                        f"wholly below --fail-under {threshold:g}"
                    )
        return lines


class _WatchedProgress:
    """A SweepProgress that shows what the inner one shows and feeds each result to the watch."""

    def __init__(self, inner: SweepProgress, watch: Watch):
        self.inner, self.watch = inner, watch

    def __enter__(self) -> _WatchedProgress:
        self.inner.__enter__()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.inner.__exit__(kind, error, trace)

    def log(self, message: str) -> None:
        self.inner.log(message)

    def start_calibration(self, count: int) -> None:
        self.inner.start_calibration(count)

    def calibrated(self, case: Case) -> None:
        self.inner.calibrated(case)

    def start_run(self) -> None:
        self.inner.start_run()

    def started(self, case: Case) -> None:
        self.inner.started(case)

    def finished(self, result: Result) -> None:
        self.inner.finished(result)
        self.watch.observe(result)


class WatchedHooks(Hooks):
    """The caller's hooks, with every sweep's results fed to a Watch."""

    def __init__(self, inner: Hooks, watch: Watch):
        self.inner, self.watch = inner, watch

    def note(self, text: str, level: NoteLevel = "info") -> None:
        self.inner.note(text, level)

    def server_output(self, line: str) -> None:
        self.inner.server_output(line)

    def launching(self, profile: Profile) -> AbstractContextManager[object]:
        return self.inner.launching(profile)

    def sweep_progress(self, total: int, already_done: int, already_passed: int) -> SweepProgress:
        return _WatchedProgress(self.inner.sweep_progress(total, already_done, already_passed), self.watch)

    def run_done(self, record) -> None:  # type: ignore[no-untyped-def]
        self.inner.run_done(record)
