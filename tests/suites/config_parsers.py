"""Independent readers of the eight config formats, used to check generated documents.

Each returns {(top, sub, key): value} and raises on a duplicate path, so a test can
assert that the asked path exists exactly once and holds the expected value.
"""

from __future__ import annotations

import configparser
import json
import re
import tomllib
from typing import Any

import yaml


class DuplicateError(ValueError):
    pass


def _put(table: dict[tuple[str, str, str], str], path: tuple[str, str, str], value: Any) -> None:
    if path in table:
        raise DuplicateError(f"duplicate path {path}")
    table[path] = str(value).lower() if isinstance(value, bool) else str(value)


def _nested(data: dict[str, Any]) -> dict[tuple[str, str, str], str]:
    table: dict[tuple[str, str, str], str] = {}
    for top, sections in data.items():
        for sub, entries in sections.items():
            for key, value in entries.items():
                _put(table, (top, sub, key), value)
    return table


class _StrictLoader(yaml.SafeLoader):
    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        keys = [self.construct_object(k, deep=deep) for k, _ in node.value]
        if len(keys) != len(set(keys)):
            raise DuplicateError(f"duplicate YAML keys in {keys}")
        return super().construct_mapping(node, deep=deep)


def _json_pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    keys = [k for k, _ in pairs]
    if len(keys) != len(set(keys)):
        raise DuplicateError(f"duplicate JSON keys in {keys}")
    return dict(pairs)


def parse_yaml(doc: str) -> dict[tuple[str, str, str], str]:
    return _nested(yaml.load(doc, Loader=_StrictLoader) or {})


def parse_json(doc: str) -> dict[tuple[str, str, str], str]:
    return _nested(json.loads(doc, object_pairs_hook=_json_pairs))


def parse_toml(doc: str) -> dict[tuple[str, str, str], str]:
    return _nested(tomllib.loads(doc))


def parse_ini(doc: str) -> dict[tuple[str, str, str], str]:
    parser = configparser.ConfigParser(strict=True, interpolation=None)
    parser.optionxform = str  # type: ignore[assignment,method-assign]
    parser.read_string(doc)
    table: dict[tuple[str, str, str], str] = {}
    for section in parser.sections():
        top, sub = section.split(".")
        for key, value in parser[section].items():
            _put(table, (top, sub, key), value)
    return table


def parse_k8s(doc: str) -> dict[tuple[str, str, str], str]:
    table: dict[tuple[str, str, str], str] = {}
    names: set[str] = set()
    for manifest in yaml.load_all(doc, Loader=_StrictLoader):
        if manifest is None:
            continue
        assert manifest["kind"] == "ConfigMap" and manifest["apiVersion"] == "v1"
        name = manifest["metadata"]["name"]
        if name in names:
            raise DuplicateError(f"duplicate ConfigMap {name}")
        names.add(name)
        for dotted, value in manifest["data"].items():
            assert isinstance(value, str)
            sub, key = dotted.split(".")
            _put(table, (name, sub, key), value)
    return table


def parse_nginx(doc: str) -> dict[tuple[str, str, str], str]:
    table: dict[tuple[str, str, str], str] = {}
    stack: list[str] = []
    for line in doc.splitlines():
        line = line.strip()
        if not line:
            continue
        if line.endswith("{"):
            stack.append(line[:-1].strip())
        elif line == "}":
            stack.pop()
        else:
            match = re.fullmatch(r"(\w+) (\S+);", line)
            assert match and len(stack) == 2, line
            _put(table, (stack[0], stack[1], match.group(1)), match.group(2))
    assert not stack
    return table


def parse_flat(doc: str, separator: str) -> dict[str, str]:
    table: dict[str, str] = {}
    for line in doc.splitlines():
        if not line or line.startswith("#"):
            continue
        name, value = line.split(separator, 1)
        if name in table:
            raise DuplicateError(f"duplicate name {name}")
        table[name] = value
    return table
