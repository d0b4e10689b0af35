"""Renderers of a block list into eight configuration formats, and how each names a path.

A document is a list of blocks: (top, [(sub, [(key, value), ...]), ...]). Every format
writes every block, section and entry in order, so a longer list never gives a shorter text.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass

from suites.config_vocab import is_number

Entry = tuple[str, str]
Section = tuple[str, list[Entry]]
Block = tuple[str, list[Section]]


def _scalar(key: str, value: str) -> str:
    return value if is_number(key, value) else json.dumps(value)


def yaml_lines(blocks: list[Block]) -> list[str]:
    lines: list[str] = []
    for index, (top, sections) in enumerate(blocks):
        if index:
            lines.append("")
        lines.append(f"{top}:")
        for sub, entries in sections:
            lines.append(f"  {sub}:")
            lines.extend(f"    {key}: {value}" for key, value in entries)
    return lines


def _bracketed_lines(blocks: list[Block], write_value: Callable[[str, str], str]) -> list[str]:
    """[top.sub] headers over `key = value` lines, sections apart by a blank line (TOML and INI)."""
    lines: list[str] = []
    for top, sections in blocks:
        for sub, entries in sections:
            if lines:
                lines.append("")
            lines.append(f"[{top}.{sub}]")
            lines.extend(f"{key} = {write_value(key, value)}" for key, value in entries)
    return lines


def toml_lines(blocks: list[Block]) -> list[str]:
    return _bracketed_lines(blocks, _scalar)


def ini_lines(blocks: list[Block]) -> list[str]:
    return _bracketed_lines(blocks, lambda _key, value: value)


def json_lines(blocks: list[Block]) -> list[str]:
    if not blocks:
        return ["{}"]
    lines = ["{"]
    for b, (top, sections) in enumerate(blocks):
        lines.append(f"  {json.dumps(top)}: {{")
        for s, (sub, entries) in enumerate(sections):
            lines.append(f"    {json.dumps(sub)}: {{")
            for e, (key, value) in enumerate(entries):
                comma = "," if e < len(entries) - 1 else ""
                lines.append(f"      {json.dumps(key)}: {_scalar(key, value)}{comma}")
            lines.append("    }" + ("," if s < len(sections) - 1 else ""))
        lines.append("  }" + ("," if b < len(blocks) - 1 else ""))
    lines.append("}")
    return lines


def nginx_lines(blocks: list[Block]) -> list[str]:
    lines: list[str] = []
    for index, (top, sections) in enumerate(blocks):
        if index:
            lines.append("")
        lines.append(f"{top} {{")
        for sub, entries in sections:
            lines.append(f"    {sub} {{")
            lines.extend(f"        {key} {value};" for key, value in entries)
            lines.append("    }")
        lines.append("}")
    return lines


def k8s_name(top: str) -> str:
    return top.replace("_", "-")


def k8s_lines(blocks: list[Block]) -> list[str]:
    lines: list[str] = []
    for top, sections in blocks:
        lines += ["---", "apiVersion: v1", "kind: ConfigMap", "metadata:", f"  name: {k8s_name(top)}"]
        lines += ["  labels:", f"    app: {top.split('_')[0]}", "data:"]
        for sub, entries in sections:
            lines.extend(f"  {sub}.{key}: {json.dumps(value)}" for key, value in entries)
    return lines


def env_name(top: str, sub: str, key: str) -> str:
    return f"{top}_{sub}_{key}".upper()


def env_lines(blocks: list[Block]) -> list[str]:
    lines: list[str] = []
    for index, (top, sections) in enumerate(blocks):
        if index:
            lines.append("")
        lines.append(f"# {top}")
        for sub, entries in sections:
            lines.extend(f"{env_name(top, sub, key)}={value}" for key, value in entries)
    return lines


def sysctl_lines(blocks: list[Block]) -> list[str]:
    lines: list[str] = []
    for index, (top, sections) in enumerate(blocks):
        if index:
            lines.append("")
        for sub, entries in sections:
            lines.extend(f"{top}.{sub}.{key} = {value}" for key, value in entries)
    return lines


def dotted(top: str, sub: str, key: str) -> str:
    return f"{top}.{sub}.{key}"


def k8s_path(top: str, sub: str, key: str) -> str:
    return f'the data key "{sub}.{key}" of the ConfigMap "{k8s_name(top)}"'


@dataclass(frozen=True)
class ConfigFormat:
    name: str
    label: str  # how the question names the document
    fence: str  # language tag of the code fence
    lines: Callable[[list[Block]], list[str]]
    path: Callable[[str, str, str], str]  # how the question names one entry


FORMATS: dict[str, ConfigFormat] = {
    f.name: f
    for f in (
        ConfigFormat("yaml", "YAML configuration", "yaml", yaml_lines, dotted),
        ConfigFormat("toml", "TOML configuration", "toml", toml_lines, dotted),
        ConfigFormat("ini", "INI configuration", "ini", ini_lines, dotted),
        ConfigFormat("json", "JSON configuration", "json", json_lines, dotted),
        ConfigFormat("nginx", "nginx-style configuration", "nginx", nginx_lines, dotted),
        ConfigFormat("k8s", "Kubernetes manifests", "yaml", k8s_lines, k8s_path),
        ConfigFormat("env", "environment file", "env", env_lines, env_name),
        ConfigFormat("sysctl", "sysctl settings", "conf", sysctl_lines, dotted),
    )
}
