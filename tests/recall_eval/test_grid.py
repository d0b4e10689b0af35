"""Grid spec parsing: geometric lengths, linear depths, one-line errors naming the bad part."""

from __future__ import annotations

import pytest

from recall_eval.errors import BadInput
from recall_eval.grid import parse_depths, parse_lengths
from suites import parse_suite_names


def test_default_length_range_is_8_geometric_points_with_both_ends():
    values = parse_lengths("338..22597")
    assert len(values) == 8
    assert values[0] == 338 and values[-1] == 22597
    ratios = [b / a for a, b in zip(values, values[1:], strict=False)]
    assert max(ratios) - min(ratios) < 0.01  # geometric: constant ratio up to rounding
    assert all(isinstance(v, int) for v in values)
    assert values == (338, 616, 1123, 2047, 3731, 6801, 12397, 22597)


def test_length_range_with_point_count():
    values = parse_lengths("338..22597:12")
    assert len(values) == 12 and values[0] == 338 and values[-1] == 22597
    assert list(values) == sorted(values)
    assert parse_lengths("1000..4000:3") == (1000, 2000, 4000)
    assert parse_lengths("500..500:1") == (500,)
    assert parse_lengths("500..500") == (500,)


def test_explicit_lengths_sorted():
    assert parse_lengths("1000,4509,22597") == (1000, 4509, 22597)
    assert parse_lengths(" 4509, 1000 ") == (1000, 4509)
    assert parse_lengths("777") == (777,)


def test_default_depths():
    assert parse_depths("0..100:5") == (0.0, 25.0, 50.0, 75.0, 100.0)
    assert parse_depths("0..100") == (0.0, 25.0, 50.0, 75.0, 100.0)
    assert parse_depths("10..90:3") == (10.0, 50.0, 90.0)
    assert parse_depths("0..100:3") == (0.0, 50.0, 100.0)
    assert parse_depths("0,33.3,100") == (0.0, 33.3, 100.0)
    assert parse_depths("50") == (50.0,)


@pytest.mark.parametrize(
    ("spec", "fragment"),
    [
        ("", "empty"),
        ("338..abc", "'abc' is not a whole number"),
        ("abc..338", "'abc' is not a whole number"),
        ("338..22597:x", "point count 'x'"),
        ("338..22597:0", "point count 0"),
        ("338..22597:", "nothing after ':'"),
        ("338..22597:3:4", "more than one ':'"),
        ("..22597", "both ends"),
        ("338..", "both ends"),
        ("22597..338", "start 22597 is above end 338"),
        ("0..100", "length 0 must be at least 1"),
        ("-5,100", "length -5"),
        ("1000,,2000", "item 2 is empty"),
        ("1000,2k", "'2k' is not a whole number"),
        ("1000,1000", "repeated"),
        ("10..12:8", "collide after rounding"),
        ("100..200:1", "1 point needs START == END"),
        ("12.5", "'12.5' is not a whole number"),
    ],
)
def test_bad_length_specs(spec, fragment):
    with pytest.raises(BadInput) as info:
        parse_lengths(spec)
    message = str(info.value)
    assert fragment in message
    assert message.startswith("--lengths")
    assert "\n" not in message
    assert info.value.exit_code == 2


@pytest.mark.parametrize(
    ("spec", "fragment"),
    [
        ("0..101:5", "depth 101 is outside 0-100"),
        ("-1..100", "depth -1 is outside"),
        ("0..100:five", "point count 'five'"),
        ("x,50", "'x' is not a number"),
        ("nan", "outside 0-100"),
        ("100..0", "start 100 is above end 0"),
        ("50,50", "repeated"),
        ("", "empty"),
    ],
)
def test_bad_depth_specs(spec, fragment):
    with pytest.raises(BadInput) as info:
        parse_depths(spec)
    assert fragment in str(info.value)
    assert str(info.value).startswith("--depths")
    assert info.value.exit_code == 2


def test_suites():
    assert parse_suite_names("needle") == ("needle",)
    assert parse_suite_names("needle, config") == ("needle", "config")
    for spec, fragment in [
        ("bogus", "unknown suite 'bogus'"),
        ("needle,", "comma-separated"),
        ("needle,needle", "repeated"),
    ]:
        with pytest.raises(BadInput, match=fragment):
            parse_suite_names(spec)
