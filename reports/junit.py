"""JUnit XML of a gated run, as CI systems read it: one <testsuite> per suite, one <testcase> per
suite x length cell (reports.gate_cells); a cell that fails the gate carries a <failure> whose message
is its recall with its interval (or mean score) and whose text lists its worst cases; a cell without
an answer from a live model is <skipped>. Written with the standard library's ElementTree, which
escapes the model's (untrusted) answers."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Sequence
from pathlib import Path

from recall_eval.store import write_atomically
from reports.gate_cells import Cell


def _suite_element(name: str, cells: list[Cell], run_name: str) -> ET.Element:
    failures = sum(cell.failure is not None for cell in cells)
    skipped = sum(cell.value is None for cell in cells)
    element = ET.Element(
        "testsuite",
        name=f"{run_name}.{name}",
        tests=str(len(cells)),
        failures=str(failures),
        errors="0",
        skipped=str(skipped),
    )
    for cell in cells:
        case = ET.SubElement(element, "testcase", classname=f"{run_name}.{name}", name=cell.name)
        baseline = f"; baseline {cell.baseline:.3f} on the same cases" if cell.baseline is not None else ""
        infra = f"; {cell.infra} infrastructure outcome(s)" if cell.infra else ""
        if cell.failure is not None:
            failure = ET.SubElement(case, "failure", message=f"{cell.figure()}{baseline}: {cell.failure}")
            failure.text = "\n".join(["worst cases:", *cell.worst])
        elif cell.value is None:
            ET.SubElement(case, "skipped", message=f"{cell.figure()}{infra}")
        out = ET.SubElement(case, "system-out")
        out.text = f"{cell.figure()}{baseline}{infra}; {cell.cases} cases"
    return element


def write_junit(path: Path, groups: Sequence[tuple[str, Sequence[Cell]]]) -> Path:
    """The JUnit XML file of the cells (see the module docstring): `groups` is (name, cells) per run,
    one for a sweep ("recall-eval.default"), one per variant for a compare."""
    root = ET.Element("testsuites", name="recall-eval")
    every = [cell for _, cells in groups for cell in cells]
    for run_name, cells in groups:
        for suite in dict.fromkeys(cell.suite for cell in cells):
            root.append(_suite_element(suite, [cell for cell in cells if cell.suite == suite], run_name))
    root.set("tests", str(len(every)))
    root.set("failures", str(sum(cell.failure is not None for cell in every)))
    ET.indent(root)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomically(path, ET.tostring(root, encoding="utf-8", xml_declaration=True))
    return path
