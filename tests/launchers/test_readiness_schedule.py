"""How often wait_ready polls (launchers/readiness.py), on a simulated clock: at most every 0.5 s for the
first 30 s (a server ready in seconds is seen within half a second), then backing off to every 2 s."""

from __future__ import annotations

import pytest

from launchers import readiness


class _Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


@pytest.mark.parametrize("ready_at", [3.4, 45.0])
def test_polls_every_half_second_early_then_back_off(monkeypatch, ready_at):
    clock = _Clock()
    monkeypatch.setattr(readiness.time, "monotonic", clock.monotonic)
    monkeypatch.setattr(readiness.time, "sleep", clock.sleep)
    polls: list[float] = []

    def probe(client, timeout_s: float) -> bool:
        polls.append(clock.now)
        return clock.now >= ready_at

    waited = readiness.wait_ready(probe, timeout_s=600)
    gaps = [b - a for a, b in zip(polls, polls[1:], strict=False)]
    early = [gap for at, gap in zip(polls, gaps, strict=False) if at + gap <= 30]
    late = [gap for at, gap in zip(polls, gaps, strict=False) if at >= 35]
    assert early and max(early) <= 0.5 + 1e-9
    assert waited - ready_at <= (0.5 if ready_at < 30 else 2.0) + 1e-9
    if ready_at > 35:
        assert late and min(late) == pytest.approx(2.0)
