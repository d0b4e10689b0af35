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
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer

from recall_eval.api.options import Declared
from recall_eval.api.run_file import Leaf, build_options, file_values, option_leaves, read_run_file

_F = TypeVar("_F", bound=Callable[..., Any])

OpenReport = Annotated[bool, typer.Option("--open", help="Open the report in the browser.")]
CONFIG_PARAM = "run_config_file"
CONTEXT_PARAM = "typer_context"  # the parsed command line: which options it gave
RunFile = Annotated[
    Path | None,
    typer.Option(
        "--config",
        metavar="FILE",
        help="A run file (TOML) with this command's options: keys are the flags without -- (suite = "
        '"needle", lengths = [338, 700], base-url = "http://..."); flags given here override it. '
        "`recall-eval config show COMMAND --config FILE` prints the result.",
        show_default=False,
    ),
]
# command function name -> how its options objects are built from parsed values (`config show` uses it)
BUILDERS: dict[str, Callable[[dict[str, Any], Callable[[str], bool]], dict[str, Any]]] = {}


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
    """Expand the command's options-object parameters into typer options (see the module docstring),
    plus --config FILE: a run file (recall_eval.api.run_file) whose keys fill the options the command
    line did not give."""
    signature = inspect.signature(func, eval_str=True)
    params: list[inspect.Parameter] = []
    expanded: dict[str, tuple[type, list[Leaf]]] = {}
    for param in signature.parameters.values():
        asked = _options_param(param.annotation)
        if asked is None:
            params.append(param.replace(kind=inspect.Parameter.KEYWORD_ONLY))
            continue
        cls, wanted = asked
        leaves = option_leaves(cls, wanted)
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
    if expanded:
        params.append(
            inspect.Parameter(CONFIG_PARAM, inspect.Parameter.KEYWORD_ONLY, default=None, annotation=RunFile)
        )
        params.append(
            inspect.Parameter(
                CONTEXT_PARAM, inspect.Parameter.KEYWORD_ONLY, default=None, annotation=typer.Context
            )
        )
    names = [param.name for param in params]
    clashes = sorted({name for name in names if names.count(name) > 1})
    if clashes:
        raise TypeError(f"{func.__name__}: options {clashes} come from two places")
    # keep the command's arguments first, in their order (typer reads positional arguments in order)
    params.sort(key=lambda p: 0 if p.default is inspect.Parameter.empty else 1)

    def build(values: dict[str, Any], given: Callable[[str], bool]) -> dict[str, Any]:
        """The options objects from the parsed values (popped from `values`) and the run file;
        `given(name)`: whether the command line gave that parameter."""
        config = values.pop(CONFIG_PARAM, None)
        every = [leaf for _, leaves in expanded.values() for leaf in leaves]
        from_file = file_values(config, read_run_file(config), every) if config is not None else {}
        built = {}
        for name, (cls, leaves) in expanded.items():
            chosen = {}
            for leaf in leaves:
                value = values.pop(leaf.name)
                chosen[leaf.path] = (
                    from_file[leaf.path] if leaf.path in from_file and not given(leaf.name) else value
                )
            built[name] = build_options(cls, leaves, chosen)
        return built

    @functools.wraps(func)
    def command(**values: Any) -> Any:
        ctx = values.pop(CONTEXT_PARAM, None)
        values.update(build(values, lambda name: _on_command_line(ctx, name)))
        return func(**values)

    BUILDERS[func.__name__] = build
    del command.__wrapped__  # typer must read the generated signature, not the function's own
    command.__signature__ = signature.replace(parameters=params)  # type: ignore[attr-defined]
    command.__annotations__ = {param.name: param.annotation for param in params}
    return command  # type: ignore[return-value]


def _on_command_line(ctx: typer.Context | None, name: str) -> bool:
    if ctx is None:
        return True
    source = ctx.get_parameter_source(name)
    return source is not None and source.name in ("COMMANDLINE", "ENVIRONMENT", "PROMPT")
