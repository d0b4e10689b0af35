"""The axes of `recall-eval study`: `--axis KNOB=V1,V2` lists, their cross product as cells, the
baseline cell, and `--only` / `--skip` filters, all in compare's variant grammar (recall_eval.variants).

    --axis dtype=fp8,bf16 --axis topk=512,2048      4 cells: dtype=fp8,topk=512 ... dtype=bf16,topk=2048
    --axis profile=dsv4-flash,dsv32 --axis bf16...  a profile axis: cells PROFILE:ITEMS

KNOB is any key of a variant item (dtype, topk, mem, ctx, tp, page, effort, think) or `profile`. A
cell's label is its items joined by ',' in the axes' order ("dtype=fp8,topk=512"), so every label is a
compare variant and parses with recall_eval.variants.parse_variant. The baseline and the filters are
partial variants ("dtype=bf16", "topk=2048,dtype=bf16"): a cell matches one when it sets every item the
filter sets. A malformed axis, baseline or filter is BadInput naming it (exit code 2).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass

from recall_eval.errors import BadInput
from recall_eval.variants import OVERRIDE_KEYS, REQUEST_KEYS, VariantSpec, parse_variant

PROFILE_AXIS = "profile"
AXIS_KEYS = (*OVERRIDE_KEYS, *REQUEST_KEYS, PROFILE_AXIS)
AXIS_SYNTAX = (
    f"an axis is KNOB=V1,V2,... with KNOB one of {', '.join(AXIS_KEYS)} (e.g. --axis dtype=fp8,bf16)"
)


@dataclass(frozen=True)
class Axis:
    key: str  # a variant key ("dtype", "topk", ...) or "profile"
    values: tuple[str, ...]  # as typed, each checked by the variant grammar


@dataclass(frozen=True)
class Cell:
    """One point of the axes' cross product."""

    label: str  # the compare variant it is ("dtype=fp8,topk=512", "dsv32:bf16")
    values: dict[str, str]  # axis key -> value, in the axes' order
    variant: VariantSpec  # the label parsed


def parse_axis(text: str) -> Axis:
    key, equals, values_text = text.strip().partition("=")
    key = key.strip()
    if not equals or not key:
        raise BadInput(f"--axis {text!r}: {AXIS_SYNTAX}")
    if key not in AXIS_KEYS:
        raise BadInput(f"--axis {text!r}: unknown knob {key!r}; {AXIS_SYNTAX}")
    values = tuple(value.strip() for value in values_text.split(","))
    if not values_text.strip() or any(not value for value in values):
        raise BadInput(f"--axis {text!r}: a value is empty; {AXIS_SYNTAX}")
    if len(set(values)) != len(values):
        raise BadInput(f"--axis {text!r}: a value is given twice; each value of an axis must differ")
    for value in values:  # each value checked alone, so the error names the axis
        parse_variant(value if key == PROFILE_AXIS else f"{key}={value}")
    return Axis(key, values)


def parse_axes(texts: Sequence[str]) -> list[Axis]:
    if not texts:
        raise BadInput(f"study needs at least one --axis; {AXIS_SYNTAX}")
    axes = [parse_axis(text) for text in texts]
    keys = [axis.key for axis in axes]
    for key in keys:
        if keys.count(key) > 1:
            raise BadInput(f"--axis {key}=... is given twice; give each knob one axis with all its values")
    return axes


def _label(values: dict[str, str]) -> str:
    items = ",".join(f"{key}={value}" for key, value in values.items() if key != PROFILE_AXIS)
    profile = values.get(PROFILE_AXIS)
    if profile is None:
        return items
    return f"{profile}:{items}" if items else profile


def cells_of(axes: Sequence[Axis]) -> list[Cell]:
    """Every cell of the cross product, the first axis varying slowest."""
    cells = []
    for combination in itertools.product(*(axis.values for axis in axes)):
        values = {axis.key: value for axis, value in zip(axes, combination, strict=True)}
        label = _label(values)
        cells.append(Cell(label, values, parse_variant(label)))
    return cells


def matches(cell: Cell, partial: VariantSpec) -> bool:
    """The cell sets every item the partial variant sets (and its profile, when it names one)."""
    variant = cell.variant
    if partial.profile is not None and partial.profile != variant.profile:
        return False
    return all(variant.overrides.get(k, object()) == v for k, v in partial.overrides.items()) and all(
        variant.request.get(k, object()) == v for k, v in partial.request.items()
    )


def _partial(option: str, text: str) -> VariantSpec:
    try:
        return parse_variant(text)
    except BadInput as err:
        raise BadInput(f"{option} {text!r}: {err}") from None


def select_cells(
    cells: Sequence[Cell], baseline: str | None, only: Sequence[str] = (), skip: Sequence[str] = ()
) -> tuple[list[Cell], Cell]:
    """(the cells to study, in order, and the baseline among them). The baseline is the one cell matching
    `baseline` (default: the first cell); --only keeps cells matching any of its filters, --skip drops
    those matching any of its; the baseline is never dropped, and a study needs two cells."""
    kept = list(cells)
    if only:
        wanted = [_partial("--only", text) for text in only]
        kept = [cell for cell in kept if any(matches(cell, w) for w in wanted)]
    if skip:
        unwanted = [_partial("--skip", text) for text in skip]
        kept = [cell for cell in kept if not any(matches(cell, u) for u in unwanted)]
    if baseline is None:
        chosen = cells[0]
    else:
        found = [cell for cell in cells if matches(cell, _partial("--baseline", baseline))]
        if len(found) != 1:
            labels = ", ".join(cell.label for cell in cells)
            what = "no cell" if not found else f"{len(found)} cells"
            raise BadInput(f"--baseline {baseline!r} matches {what} of the study; name one of: {labels}")
        chosen = found[0]
    if chosen not in kept:
        raise BadInput(
            f"the baseline {chosen.label!r} is left out by --only/--skip; keep it or pick another --baseline"
        )
    if len(kept) < 2:
        raise BadInput(
            "a study needs at least two cells after --only/--skip (the baseline and one to compare with it)"
        )
    return kept, chosen
