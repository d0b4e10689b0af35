"""Turns engine steps into text deltas with SGLang's finish semantics (EOS, length, stop strings).

Stop strings are matched on the decoded text; the tail that could still become a stop string
is held back until it is decided, so a client never sees part of a stop string.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import aclosing
from dataclasses import dataclass, field

import numpy as np

from launchers.reference.engine_api import StepOutput
from launchers.reference.http_api import FinishReason
from launchers.reference.scheduler import GenerationJob, Scheduler


@dataclass(frozen=True)
class TextStep:
    delta: str  # text released to the client by this step (may be "")
    token_id: int
    finish_reason: FinishReason | None  # set on the last step only
    matched_stop: int | str | None = None  # EOS token id or the stop string that ended generation


@dataclass
class GenerationRecord:
    """Everything a finished generation produced (for non-streamed responses and /generate)."""

    text: str = ""
    output_ids: list[int] = field(default_factory=list)
    finish_reason: FinishReason | None = None
    matched_stop: int | str | None = None
    indexer_topk: list[np.ndarray] = field(default_factory=list)
    cached_tokens: int = 0  # prompt tokens the prefix cache supplied (SGLang's meta_info.cached_tokens)


class StopMatcher:
    def __init__(self, stops: tuple[str, ...]):
        self._stops = stops
        self._holdback = max((len(s) for s in stops), default=1) - 1
        self.text = ""  # decoded text so far, stop string excluded once matched
        self._released = 0

    def feed(self, delta: str, final: bool) -> tuple[str, str | None]:
        """Add a delta; returns (text to release now, matched stop string or None)."""
        search_from = max(0, len(self.text) - self._holdback)
        self.text += delta
        for stop in self._stops:
            at = self.text.find(stop, search_from)
            if at >= 0:
                self.text = self.text[:at]
                return self._release(len(self.text)), stop
        end = len(self.text) if final else max(self._released, len(self.text) - self._holdback)
        return self._release(end), None

    def _release(self, end: int) -> str:
        out = self.text[self._released : end]
        self._released = max(self._released, end)
        return out


async def text_steps(
    scheduler: Scheduler, job: GenerationJob, stops: tuple[str, ...], record: GenerationRecord
) -> AsyncIterator[TextStep]:
    """Text deltas of one generation; fills record as it goes. Leaving early cancels the generation."""
    if job.max_new_tokens <= 0:
        record.finish_reason = "length"
        return
    matcher = StopMatcher(stops)
    async with aclosing(scheduler.stream(job)) as steps:
        async for step in steps:
            yield _consume(step, matcher, record)
            if record.finish_reason is not None:
                return
    if record.finish_reason is None:  # the engine ended without a reason: treat it as the length limit
        record.finish_reason = "length"


def _consume(step: StepOutput, matcher: StopMatcher, record: GenerationRecord) -> TextStep:
    record.output_ids.append(step.token_id)
    record.cached_tokens = max(record.cached_tokens, step.cached_tokens)
    if step.indexer_topk is not None:
        record.indexer_topk.append(step.indexer_topk)
    delta, matched = matcher.feed(step.text, final=step.finish_reason is not None)
    record.text = matcher.text
    if matched is not None:
        record.finish_reason, record.matched_stop = "stop", matched
    elif step.finish_reason is not None:
        record.finish_reason = step.finish_reason
        record.matched_stop = step.token_id if step.finish_reason == "stop" else None
    return TextStep(delta, step.token_id, record.finish_reason, record.matched_stop)
