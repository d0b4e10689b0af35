"""The Typer application object shared by the command modules, and the error convention."""

from __future__ import annotations

import sys

import typer
from rich.console import Console

from recall_eval.errors import UserError

app = typer.Typer(
    name="recall-eval",
    help="Long-context recall evaluation for sparse-attention (DSA) LLM serving.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,  # plain click help: flags without a <bool> type, one style everywhere
    context_settings={"max_content_width": 110},
)
console = Console(stderr=True)
DEBUG = {"on": False}  # set by the --debug callback; read only by run_cli


def _print_version(value: bool) -> None:
    if value:
        from recall_eval.api.versions import package_version

        print(f"recall-eval {package_version()}")
        raise typer.Exit()


@app.callback()
def _root(
    debug: bool = typer.Option(False, "--debug", help="Show tracebacks for errors."),
    version: bool = typer.Option(
        False, "--version", help="Print the version and exit.", callback=_print_version, is_eager=True
    ),
) -> None:
    DEBUG["on"] = debug


def run_cli() -> None:
    """Run the app; turn UserError into one red line and a non-zero exit code."""
    try:
        # Without standalone mode, click returns (not raises) the code of a typer.Exit from a command.
        code = app(standalone_mode=False)
        if isinstance(code, int) and code != 0:
            sys.exit(code)
    except UserError as err:
        if DEBUG["on"]:
            raise
        console.print(f"[red]error:[/red] {err}", highlight=False, soft_wrap=True)
        sys.exit(err.exit_code)
    except typer.Exit as exit_:
        sys.exit(exit_.exit_code)
    except (typer.Abort, KeyboardInterrupt):
        console.print("[yellow]aborted[/yellow]")
        sys.exit(130)
    except Exception as exc:  # click usage errors and the like
        import click

        # Typer >= 0.2x vendors click (typer._click): its usage errors are not click.ClickException.
        usage_error_types = (click.ClickException, typer.BadParameter.__mro__[2])
        if isinstance(exc, usage_error_types):
            exc.show()
            sys.exit(exc.exit_code)
        if DEBUG["on"]:
            raise
        console.print(f"[red]error:[/red] {type(exc).__name__}: {exc} (run with --debug for the traceback)")
        sys.exit(1)
