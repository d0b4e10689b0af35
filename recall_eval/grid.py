"""Grid specs from the command line: context lengths (geometric) and needle depths (linear percent).

Lengths:  "338..22597"      8 geometric points, both ends included, rounded to whole tokens
          "338..22597:12"   12 geometric points
          "1000,4509,22597" exactly these
Depths:   "0..100:5"        5 evenly spaced percents (0, 25, 50, 75, 100); "0..100" means 5 points
          "0,50,100"        exactly these
A bad spec raises BadInput naming the bad part (exit code 2).
"""

from __future__ import annotations

import math

from recall_eval.errors import BadInput

DEFAULT_LENGTH_POINTS = 8
DEFAULT_DEPTH_POINTS = 5
MAX_POINTS = 1000


def _bad(option: str, spec: str, why: str) -> BadInput:
    return BadInput(f"{option} {spec!r}: {why}")


def _split_range(option: str, spec: str, default_points: int) -> tuple[str, str, int]:
    """'a..b[:n]' -> ('a', 'b', n)."""
    body, _, count_text = spec.partition(":")
    if ":" in count_text:
        raise _bad(option, spec, "more than one ':' (write START..END:POINTS)")
    low_text, _, high_text = body.partition("..")
    if not low_text or not high_text:
        raise _bad(option, spec, "a range needs both ends (write START..END or START..END:POINTS)")
    if not count_text and ":" in spec:
        raise _bad(option, spec, "nothing after ':' (write the number of points, e.g. :8)")
    points = default_points
    if count_text:
        try:
            points = int(count_text)
        except ValueError as err:
            raise _bad(option, spec, f"point count {count_text!r} is not a whole number") from err
        if not 1 <= points <= MAX_POINTS:
            raise _bad(option, spec, f"point count {points} must be between 1 and {MAX_POINTS}")
    return low_text, high_text, points


def _whole(option: str, spec: str, text: str) -> int:
    try:
        value = int(text.strip())
    except ValueError as err:
        raise _bad(option, spec, f"{text.strip()!r} is not a whole number of tokens") from err
    if value < 1:
        raise _bad(option, spec, f"length {value} must be at least 1 token")
    return value


def _percent(option: str, spec: str, text: str) -> float:
    try:
        value = float(text.strip())
    except ValueError as err:
        raise _bad(option, spec, f"{text.strip()!r} is not a number (depths are percents 0-100)") from err
    if not math.isfinite(value) or not 0.0 <= value <= 100.0:
        raise _bad(option, spec, f"depth {text.strip()} is outside 0-100 (depths are percents)")
    return value


def _explicit_items(option: str, spec: str) -> list[str]:
    items = [item for item in spec.split(",")]
    for position, item in enumerate(items, start=1):
        if not item.strip():
            raise _bad(option, spec, f"item {position} is empty (write comma-separated values)")
    return items


def parse_lengths(spec: str, option: str = "--lengths") -> tuple[int, ...]:
    """Parse a length spec into sorted, distinct token counts."""
    spec = spec.strip()
    if not spec:
        raise _bad(option, spec, "empty (write e.g. 338..22597, 338..22597:12 or 1000,4509,22597)")
    if ".." in spec:
        low_text, high_text, points = _split_range(option, spec, DEFAULT_LENGTH_POINTS)
        low, high = _whole(option, spec, low_text), _whole(option, spec, high_text)
        if low > high:
            raise _bad(option, spec, f"start {low} is above end {high}")
        if points == 1 or low == high:
            if low != high:
                raise _bad(option, spec, "a range of 1 point needs START == END (or write one length)")
            return (low,)
        ratio = (high / low) ** (1 / (points - 1))
        values = [round(low * ratio**step) for step in range(points)]
        values[0], values[-1] = low, high  # exact ends despite float rounding
        if len(set(values)) != points:
            raise _bad(
                option, spec, f"{points} geometric points between {low} and {high} collide after rounding"
            )
        return tuple(values)
    values = [_whole(option, spec, item) for item in _explicit_items(option, spec)]
    if len(set(values)) != len(values):
        raise _bad(option, spec, "a length is repeated")
    return tuple(sorted(values))


def parse_depths(spec: str, option: str = "--depths") -> tuple[float, ...]:
    """Parse a depth spec into sorted, distinct percents."""
    spec = spec.strip()
    if not spec:
        raise _bad(option, spec, "empty (write e.g. 0..100:5 or 0,50,100)")
    if ".." in spec:
        low_text, high_text, points = _split_range(option, spec, DEFAULT_DEPTH_POINTS)
        low, high = _percent(option, spec, low_text), _percent(option, spec, high_text)
        if low > high:
            raise _bad(option, spec, f"start {low:g} is above end {high:g}")
        if points == 1 or low == high:
            if low != high:
                raise _bad(option, spec, "a range of 1 point needs START == END (or write one depth)")
            return (low,)
        step = (high - low) / (points - 1)
        values = [round(low + step * index, 6) for index in range(points)]
        values[-1] = high
        return tuple(values)
    values = [_percent(option, spec, item) for item in _explicit_items(option, spec)]
    if len(set(values)) != len(values):
        raise _bad(option, spec, "a depth is repeated")
    return tuple(sorted(values))
