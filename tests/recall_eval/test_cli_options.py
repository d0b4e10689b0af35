"""The CLI's parameters come from the option declarations: one declaration gives a command its flag, type,
help and default, and the command receives the options object built back from them."""

from __future__ import annotations

import dataclasses
from typing import Annotated

import typer
from typer.testing import CliRunner

import recall_eval.cli.compare
import recall_eval.cli.sweep  # noqa: F401 - registers the commands
from recall_eval import api
from recall_eval.api.options import GridOptions, RequestOptions, SweepOptions, declared, option
from recall_eval.cli.app import app as cli_app
from recall_eval.cli.options import help_of, only, takes_options


@dataclasses.dataclass(frozen=True, kw_only=True)
class _Knobs:
    """An options group as a new feature would add one."""

    temperature: float | None = option("--temperature", "sampling temperature", cli=float, default=0.0)
    stop: list[str] | None = option("--stop", "a stop string (repeatable)", cli=list[str], metavar="TEXT")
    strict: bool = option("--strict", "score by the strict verdict", cli=bool, default=False)


@dataclasses.dataclass(frozen=True, kw_only=True)
class _Options:
    grid: GridOptions = GridOptions()
    knobs: _Knobs = _Knobs()
    label: str | None = option("--label", "a label", default="x")


def _command(received: list[object]) -> typer.Typer:
    one = typer.Typer(rich_markup_mode=None)

    @one.command()
    @takes_options
    def run(
        name: Annotated[str, typer.Argument(help="a name")],
        options: _Options,
        request: Annotated[RequestOptions, only("concurrency")],
        loud: Annotated[bool, typer.Option("--loud")] = False,
    ) -> None:
        received.append((name, options, request, loud))

    @one.command()
    def other() -> None:  # a second command, so typer keeps `run` as a subcommand
        pass

    return one


def test_a_declared_option_reaches_the_command_as_its_options_object() -> None:
    received: list[object] = []
    result = CliRunner().invoke(
        _command(received),
        [
            "run",
            "n1",
            "--temperature",
            "0.5",
            "--stop",
            "a",
            "--stop",
            "b",
            "--strict",
            "--trials",
            "3",
            "--concurrency",
            "4",
            "--loud",
        ],
    )
    assert result.exit_code == 0, result.output
    name, options, request, loud = received[0]
    assert name == "n1" and loud is True
    assert options == _Options(
        grid=GridOptions(trials=3), knobs=_Knobs(temperature=0.5, stop=["a", "b"], strict=True)
    )
    assert request == RequestOptions(concurrency=4)  # only the field asked for; the rest unset


def test_nothing_given_builds_unset_options_and_help_shows_each_declaration() -> None:
    received: list[object] = []
    runner = CliRunner()
    assert runner.invoke(_command(received), ["run", "n"]).exit_code == 0
    assert received[0][1] == _Options() and received[0][2] == RequestOptions()
    shown = runner.invoke(_command([]), ["run", "--help"], terminal_width=200).output
    assert "--temperature" in shown and "Sampling temperature. (default: 0.0)" in shown
    assert "--stop TEXT" in shown and "--strict" in shown and "--lengths" in shown
    assert "--request-timeout" not in shown  # not asked for: only("concurrency")


def test_sweep_and_compare_offer_every_declared_flag_of_their_options() -> None:
    runner = CliRunner()
    for command, options in (("sweep", SweepOptions), ("compare", api.CompareOptions)):
        shown = " ".join(runner.invoke(cli_app, [command, "--help"], terminal_width=400).output.split())
        for group in (
            options,
            GridOptions,
            RequestOptions,
            *([api.TargetOptions] if command == "sweep" else []),
        ):
            for field in dataclasses.fields(group):
                found = declared(group, field.name)
                if found is not None:
                    assert found.name in shown and help_of(found) in shown, (command, field.name)
