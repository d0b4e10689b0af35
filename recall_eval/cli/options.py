"""Command parameters generated from the option declarations of recall_eval.api.options.

A command asks for an options object by annotating a parameter with its class (`options: SweepOptions`),
or with some of its fields (`Annotated[ResumeOptions, only("retry", "stop_leftovers")]`). `@takes_options`
replaces that parameter, in the signature typer reads, by one typer option per declared field (the
flag, type, help and default of its declaration; nested groups such as `grid` are expanded), and at
call time builds the object back from them. So a flag, its help and its default are written once, in
the declaration, and every command that takes the group has it. Parameters that fill no options object
(`--open`, `--resume`, arguments) stay ordinary typer parameters of the command.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import typing
from collections.abc import Callable
from typing import Annotated, Any, TypeVar

import typer

from recall_eval.api.options import Declared

_F = TypeVar("_F", bound=Callable[..., Any])

OpenReport = Annotated[bool, typer.Option("--open", help="Open the report in the browser.")]


class only:  # noqa: N801 - reads as a marker in an annotation: Annotated[ResumeOptions, only("retry")]
    """Take only these fields of an options object (by field name; a group name takes all of it)."""

    def __init__(self, *names: str):
        self.names = names


def help_of(declared: Declared) -> str:
    """The --help text: the declaration's help as a sentence, then '(default: X)' when it has one."""
    text = declared.help[0].upper() + declared.help[1:] + "."
    shown = declared.default_text or (None if declared.default is None else str(declared.default))
    if declared.cli is bool:  # a flag says what it turns on; a pair names the side taken by default
        on, _, off = declared.flag.partition("/")
        shown = (on if declared.default else off) if off else None
    return f"{text} (default: {shown})" if shown is not None else text


def _typer_option(declared: Declared) -> Any:
    return typer.Option(declared.flag, help=help_of(declared), metavar=declared.metavar, show_default=False)


@dataclasses.dataclass(frozen=True)
class _Leaf:
    path: tuple[str, ...]  # field names from the options object down to the field
    declared: Declared

    @property
    def name(self) -> str:
        return self.path[-1]


def _leaves(cls: type, wanted: tuple[str, ...] | None, prefix: tuple[str, ...] = ()) -> list[_Leaf]:
    """The declared fields of `cls`, nested groups expanded (in declaration order)."""
    hints = typing.get_type_hints(cls)
    found = []
    for item in dataclasses.fields(cls):
        take = wanted is None or item.name in wanted
        if "option" in item.metadata:
            if take:
                found.append(_Leaf((*prefix, item.name), item.metadata["option"]))
        elif dataclasses.is_dataclass(hints.get(item.name)):
            inner = None if take else wanted
            found += _leaves(hints[item.name], inner, (*prefix, item.name))
    return found


def _build(cls: type, leaves: list[_Leaf], values: dict[tuple[str, ...], Any], depth: int = 0) -> Any:
    """The options object from the values of its leaves (fields not taken keep their defaults)."""
    hints = typing.get_type_hints(cls)
    direct = {leaf.path[depth]: values[leaf.path] for leaf in leaves if len(leaf.path) == depth + 1}
    groups = {leaf.path[depth] for leaf in leaves if len(leaf.path) > depth + 1}
    for group in groups:
        inner = [leaf for leaf in leaves if len(leaf.path) > depth + 1 and leaf.path[depth] == group]
        direct[group] = _build(hints[group], inner, values, depth + 1)
    return cls(**direct)


def _options_param(annotation: Any) -> tuple[type, tuple[str, ...] | None] | None:
    """(class, wanted fields) when a parameter asks for an options object, else None."""
    wanted = None
    if typing.get_origin(annotation) is Annotated:
        annotation, *extras = typing.get_args(annotation)
        marks = [extra for extra in extras if isinstance(extra, only)]
        if not marks:
            return None
        wanted = marks[0].names
    if isinstance(annotation, type) and dataclasses.is_dataclass(annotation):
        return annotation, wanted
    return None


def takes_options(func: _F) -> _F:
    """Expand the command's options-object parameters into typer options (see the module docstring)."""
    signature = inspect.signature(func, eval_str=True)
    params: list[inspect.Parameter] = []
    expanded: dict[str, tuple[type, list[_Leaf]]] = {}
    for param in signature.parameters.values():
        asked = _options_param(param.annotation)
        if asked is None:
            params.append(param.replace(kind=inspect.Parameter.KEYWORD_ONLY))
            continue
        cls, wanted = asked
        leaves = _leaves(cls, wanted)
        expanded[param.name] = (cls, leaves)
        for leaf in leaves:
            start = leaf.declared.default if leaf.declared.cli is bool else None
            kind = leaf.declared.cli if leaf.declared.cli is bool else leaf.declared.cli | None
            params.append(
                inspect.Parameter(
                    leaf.name,
                    inspect.Parameter.KEYWORD_ONLY,
                    default=start,
                    annotation=Annotated[kind, _typer_option(leaf.declared)],
                )
            )
    names = [param.name for param in params]
    clashes = sorted({name for name in names if names.count(name) > 1})
    if clashes:
        raise TypeError(f"{func.__name__}: options {clashes} come from two places")
    # keep the command's arguments first, in their order (typer reads positional arguments in order)
    params.sort(key=lambda p: 0 if p.default is inspect.Parameter.empty else 1)

    @functools.wraps(func)
    def command(**values: Any) -> Any:
        for name, (cls, leaves) in expanded.items():
            values[name] = _build(cls, leaves, {leaf.path: values.pop(leaf.name) for leaf in leaves})
        return func(**values)

    del command.__wrapped__  # typer must read the generated signature, not the function's own
    command.__signature__ = signature.replace(parameters=params)  # type: ignore[attr-defined]
    command.__annotations__ = {param.name: param.annotation for param in params}
    return command  # type: ignore[return-value]
