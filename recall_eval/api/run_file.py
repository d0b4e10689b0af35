"""A run file: a command's options in TOML (`--config run.toml`), validated by the option declarations.

Keys are the options' flags without the dashes (`suite`, `lengths`, `base-url`, `fail-under`; `report`
for --report/--no-report), values what the flag takes, or their TOML form (`lengths = [338, 700]`,
`chat-template-kwargs = {thinking = true}`, `header = ["X-Team: recall"]`). Every value is checked
against the type of the field it fills (the same dataclasses that hold the options); an unknown key is
an error naming the key. The command line wins over the file. The effective configuration (every
option, given or default) is written back in the same format: `recall-eval config show`, and
config.toml in each run directory. Secrets (the API key, header values) are never written.
"""

from __future__ import annotations

import dataclasses
import difflib
import json
import tomllib
import typing
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import TypeAdapter, ValidationError

from recall_eval.api.options import Declared
from recall_eval.errors import BadInput
from recall_eval.redact import Redactor
from recall_eval.server_url import without_userinfo

CONFIG_FILE = "config.toml"  # the effective configuration, in a run directory
SECRET_FIELDS = ("api_key", "headers")  # used, never written back


@dataclass(frozen=True)
class Leaf:
    """One declared option inside an options object (nested groups followed)."""

    path: tuple[str, ...]  # field names from the options object down to the field
    declared: Declared
    annotation: Any  # the field's type

    @property
    def name(self) -> str:
        return self.path[-1]

    @property
    def key(self) -> str:
        """Its key in a run file: the flag without dashes."""
        return self.declared.name.lstrip("-")


def option_leaves(
    cls: type, wanted: tuple[str, ...] | None = None, prefix: tuple[str, ...] = ()
) -> list[Leaf]:
    """The declared fields of `cls`, nested groups expanded, in declaration order; `wanted`: only these
    field names (a group's name takes all of it)."""
    hints = typing.get_type_hints(cls)
    found = []
    for item in dataclasses.fields(cls):
        take = wanted is None or item.name in wanted
        if "option" in item.metadata:
            if take:
                found.append(Leaf((*prefix, item.name), item.metadata["option"], hints[item.name]))
        elif dataclasses.is_dataclass(hints.get(item.name)):
            found += option_leaves(hints[item.name], None if take else wanted, (*prefix, item.name))
    return found


def build_options(
    cls: type, leaves: Sequence[Leaf], values: Mapping[tuple[str, ...], Any], depth: int = 0
) -> Any:
    """The options object from its leaves' values (fields not among the leaves keep their defaults)."""
    hints = typing.get_type_hints(cls)
    direct = {leaf.path[depth]: values[leaf.path] for leaf in leaves if len(leaf.path) == depth + 1}
    for group in {leaf.path[depth] for leaf in leaves if len(leaf.path) > depth + 1}:
        inner = [leaf for leaf in leaves if len(leaf.path) > depth + 1 and leaf.path[depth] == group]
        direct[group] = build_options(hints[group], inner, values, depth + 1)
    return cls(**direct)


def read_run_file(path: Path | str) -> dict[str, Any]:
    """The TOML document of a run file; BadInput when it is missing or not TOML."""
    path = Path(path)
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise BadInput(f"--config {path}: no such file") from None
    except (OSError, UnicodeDecodeError) as err:
        raise BadInput(f"--config {path}: cannot be read ({err})") from None
    except tomllib.TOMLDecodeError as err:
        raise BadInput(f"--config {path}: not TOML ({err})") from None


def file_values(
    path: Path | str, document: Mapping[str, Any], leaves: Sequence[Leaf]
) -> dict[tuple[str, ...], Any]:
    """Each key of a run file as the value of its option, checked against the option's field type;
    BadInput naming an unknown key (with the nearest known one) or a value of the wrong type."""
    by_key = {leaf.key: leaf for leaf in leaves}
    found: dict[tuple[str, ...], Any] = {}
    for key, value in document.items():
        leaf = by_key.get(key) or by_key.get(key.replace("_", "-"))
        if leaf is None:
            near = difflib.get_close_matches(key, list(by_key), n=1)
            hint = f" (did you mean {near[0]!r}?)" if near else ""
            raise BadInput(
                f"--config {path}: unknown key {key!r}{hint}; keys are the command's flags without --"
            )
        if leaf.declared.cli == list[str] and isinstance(value, str):
            value = [value]  # a repeatable flag given once, as the command line gives it
        try:
            found[leaf.path] = TypeAdapter(leaf.annotation).validate_python(value)
        except ValidationError as err:
            message = err.errors()[0]["msg"]
            raise BadInput(
                f"--config {path}: {key} = {value!r}: {message} ({leaf.declared.name} takes it)"
            ) from None
    return found


def _plain(value: Any) -> Any:
    """A value as TOML can hold it (None: left out)."""
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items() if v is not None}
    if isinstance(value, list | tuple):
        return [_plain(item) for item in value]
    if isinstance(value, str | bool | int | float) or value is None:
        return value
    return str(value)


def _without_userinfo(value: Any) -> Any:
    """A URL (or URLs) with any `user:pass@` removed."""
    if isinstance(value, str):
        return without_userinfo(value)
    if isinstance(value, list | tuple):
        return type(value)(_without_userinfo(item) for item in value)
    return value


def _given(value: Any, declared: Declared) -> bool:
    if value is None or (isinstance(value, list | tuple) and not value):
        return False
    return not (declared.cli is bool and value == declared.default)


def options_document(*objects: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """The effective configuration of options objects, by run-file key: (what was given, the defaults
    of the rest). An option two objects share is taken from the first; secrets are left out."""
    given: dict[str, Any] = {}
    fallback: dict[str, Any] = {}
    for obj in objects:
        for leaf in option_leaves(type(obj)):
            if leaf.name in SECRET_FIELDS or leaf.key in given:
                continue
            value = obj
            for name in leaf.path:
                value = getattr(value, name)
            if leaf.name.endswith("url"):  # a URL's user:password is a secret too
                value = _without_userinfo(value)
            if isinstance(
                value, Mapping
            ):  # a JSON object (--extra-body): secret-named keys masked, as in run.json
                value = Redactor().value(dict(value))
            if _given(value, leaf.declared):
                given[leaf.key] = _plain(value)
                fallback.pop(leaf.key, None)
            elif leaf.declared.default is not None:
                fallback.setdefault(leaf.key, _plain(leaf.declared.default))
    return given, fallback


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)  # a JSON string is a TOML basic string
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(item) for item in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{json.dumps(k)} = {_toml_value(v)}" for k, v in value.items()) + "}"
    raise TypeError(f"no TOML form for {value!r}")


def to_toml(given: Mapping[str, Any], fallback: Mapping[str, Any] = {}) -> str:  # noqa: B006 - read only
    """A run file's text: the given options, then the defaults of the others as comments (TOML has no
    "unset"; a default written as a value would count as given, e.g. --profile beside --base-url)."""
    lines = [f"{key} = {_toml_value(value)}\n" for key, value in given.items()]
    if fallback:
        lines.append("# defaults of the options not given:\n")
        lines += [f"# {key} = {_toml_value(value)}\n" for key, value in fallback.items()]
    return "".join(lines)


def write_config(directory: Path, *objects: Any) -> Path:
    """config.toml in a run (or compare) directory: the effective configuration it was made with."""
    from recall_eval.store import write_atomically

    path = Path(directory) / CONFIG_FILE
    write_atomically(path, to_toml(*options_document(*objects)).encode("utf-8"))
    return path
