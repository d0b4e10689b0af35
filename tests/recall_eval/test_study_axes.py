"""The axes of `recall-eval study`: cross product in compare's variant grammar, the baseline, --only and
--skip, and one-line errors (BadInput) for bad axes, baselines and filters."""

from __future__ import annotations

import pytest

from recall_eval.errors import BadInput
from recall_eval.study_axes import cells_of, parse_axes, select_cells
from recall_eval.variants import parse_variant


def test_cross_product_labels_are_compare_variants() -> None:
    """Two axes give four cells, the first axis varying slowest; each label parses as a compare variant
    with the cell's overrides."""
    cells = cells_of(parse_axes(["dtype=fp8,bf16", "topk=4,64"]))
    assert [c.label for c in cells] == [
        "dtype=fp8,topk=4",
        "dtype=fp8,topk=64",
        "dtype=bf16,topk=4",
        "dtype=bf16,topk=64",
    ]
    assert cells[2].variant.overrides == {"index_k_dtype": "bf16", "index_topk": 4}
    assert all(parse_variant(c.label) == c.variant for c in cells)
    assert cells[1].values == {"dtype": "fp8", "topk": "64"}


def test_profile_and_request_knob_axes() -> None:
    """A profile axis names the profile (PROFILE:ITEMS); request knobs (think) go to the request."""
    cells = cells_of(parse_axes(["profile=reference,dsv32", "think=on,off"]))
    assert [c.label for c in cells] == [
        "reference:think=on",
        "reference:think=off",
        "dsv32:think=on",
        "dsv32:think=off",
    ]
    assert cells[2].variant.profile == "dsv32"
    assert cells[0].variant.request["chat_template_kwargs"] == {"thinking": True, "enable_thinking": True}
    assert [c.label for c in cells_of(parse_axes(["profile=reference,dsv32"]))] == ["reference", "dsv32"]


def test_baseline_only_and_skip() -> None:
    """The baseline is the one cell matching a partial variant (items in any order); --only keeps matching
    cells, --skip drops them; default baseline: the first cell."""
    cells = cells_of(parse_axes(["dtype=fp8,bf16", "topk=4,64"]))
    kept, base = select_cells(cells, "topk=64,dtype=bf16")
    assert base.label == "dtype=bf16,topk=64" and len(kept) == 4
    kept, base = select_cells(cells, "dtype=bf16,topk=64", only=["topk=64"])
    assert [c.label for c in kept] == ["dtype=fp8,topk=64", "dtype=bf16,topk=64"]
    kept, base = select_cells(cells, None, skip=["dtype=bf16,topk=4"])
    assert base.label == "dtype=fp8,topk=4"
    assert [c.label for c in kept] == ["dtype=fp8,topk=4", "dtype=fp8,topk=64", "dtype=bf16,topk=64"]


@pytest.mark.parametrize(
    ("axes", "baseline", "only", "skip", "names"),
    [
        ([], None, (), (), "at least one --axis"),
        (["dtype"], None, (), (), "KNOB=V1,V2"),
        (["colour=red,blue"], None, (), (), "unknown knob 'colour'"),
        (["topk=4,"], None, (), (), "a value is empty"),
        (["topk=4,4"], None, (), (), "given twice"),
        (["topk=four"], None, (), (), "topk is a whole number"),
        (["topk=4", "topk=8"], None, (), (), "--axis topk=... is given twice"),
        (["dtype=fp8,bf16"], "dtype=fp4", (), (), "matches no cell"),
        (["dtype=fp8,bf16", "topk=4,64"], "dtype=bf16", (), (), "matches 2 cells"),
        (["dtype=fp8,bf16"], "dtype=bf16", (), ["dtype=bf16"], "baseline 'dtype=bf16' is left out"),
        (["dtype=fp8,bf16"], None, ["dtype=fp8"], (), "at least two cells"),
        (["dtype=fp8,bf16"], None, ["wat="], (), "--only 'wat='"),
    ],
)
def test_bad_axes_are_one_line(
    axes: list[str], baseline: str | None, only: tuple[str, ...], skip: tuple[str, ...], names: str
) -> None:
    with pytest.raises(BadInput) as err:
        select_cells(cells_of(parse_axes(axes)), baseline, only, skip)
    assert names in str(err.value) and "\n" not in str(err.value)
