"""The Typer application object shared by the command modules, and the error convention.

Messages are plain text: an error line may quote a server, a path or a command (`pip install -e
'.[sglang]'`, `--lengths "[bold]1000"`), and rich markup would eat its brackets, so nothing the program
did not write itself goes through markup (`say`). SIGTERM is handled like Ctrl-C (the run is marked
interrupted and the resume command printed), then the process exits 143. This module imports nothing
heavy: `recall-eval --help` and `--version` must stay cheap (tests/benchmarks/bench_startup.py).
"""

from __future__ import annotations

import os
import signal
import sys

import typer
from rich.console import Console
from rich.text import Text

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
# soft_wrap: a line is never broken at the terminal width (piped output is read by programs and people)
console = Console(stderr=True, soft_wrap=True)
DEBUG = {"on": False}  # set by the --debug callback; read only by run_cli
EXIT_INTERRUPTED = 130  # Ctrl-C (128 + SIGINT)
EXIT_TERMINATED = 143  # SIGTERM (128 + SIGTERM)
_TERMINATED = {"on": False}


def say(message: str, label: str = "", style: str = "") -> None:
    """One line on stderr: an optional styled label ("error:"), then the message as plain text."""
    text = Text.assemble((label, style), " ", message) if label else Text(message, style=style)
    console.print(text, highlight=False, soft_wrap=True)


def interrupted_exit_code() -> int:
    """143 when SIGTERM stopped the program, else 130 (Ctrl-C)."""
    return EXIT_TERMINATED if _TERMINATED["on"] else EXIT_INTERRUPTED


def interrupted_word() -> str:
    return "terminated (SIGTERM)" if _TERMINATED["on"] else "interrupted"


def _on_sigterm(signum: int, frame: object) -> None:
    """SIGTERM takes Ctrl-C's path: SIGINT to ourselves, so the run is stopped and recorded the same way.
    Where SIGINT is ignored (a background job of a script), KeyboardInterrupt is raised here instead."""
    _TERMINATED["on"] = True
    if signal.getsignal(signal.SIGINT) in (signal.SIG_IGN, signal.SIG_DFL, None):
        raise KeyboardInterrupt
    os.kill(os.getpid(), signal.SIGINT)


def _print_version(value: bool) -> None:
    if value:
        from recall_eval.version import package_version

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


def _tidy_help() -> None:
    """Arguments in --help as the README writes them (VARIANT..., RUN...), not typer's `{variants}` and
    `<list[str]>`; a no-op where typer's internals differ."""
    try:
        from typer.core import TyperArgument
    except ImportError:  # pragma: no cover - another typer
        return
    if not hasattr(TyperArgument, "_usage_display_name") or not hasattr(TyperArgument, "display_type_rich"):
        return
    plain_type = TyperArgument.display_type_rich

    def usage_name(self: TyperArgument) -> str:
        name = self.display_name_raw
        return name if self.required else f"[{name}]"

    def display_type(self: TyperArgument, ctx: object) -> str | None:
        text = plain_type(self, ctx)  # type: ignore[arg-type]
        return None if text and text.startswith("<list[") else text

    TyperArgument._usage_display_name = usage_name  # type: ignore[method-assign]
    TyperArgument.display_type_rich = display_type  # type: ignore[method-assign]


def run_cli() -> None:
    """Run the app; turn UserError into one plain line and a non-zero exit code."""
    _tidy_help()
    previous = signal.signal(signal.SIGTERM, _on_sigterm)
    try:
        # Without standalone mode, click returns (not raises) the code of a typer.Exit from a command.
        code = app(standalone_mode=False)
        if isinstance(code, int) and code != 0:
            sys.exit(code)
    except UserError as err:
        if DEBUG["on"]:
            raise
        say(str(err), "error:", "red")
        sys.exit(err.exit_code)
    except typer.Exit as exit_:
        sys.exit(exit_.exit_code)
    except (typer.Abort, KeyboardInterrupt):
        say(interrupted_word(), style="yellow")
        sys.exit(interrupted_exit_code())
    except Exception as exc:  # click usage errors and the like
        import click

        # Typer >= 0.2x vendors click: its usage errors are typer.TyperException (public), not
        # click.ClickException (what older typer raised); both can show() themselves.
        usage_error_types = (click.ClickException, getattr(typer, "TyperException", click.ClickException))
        if isinstance(exc, usage_error_types) and hasattr(exc, "show"):
            exc.show()
            sys.exit(exc.exit_code)
        if DEBUG["on"]:
            raise
        say(f"{type(exc).__name__}: {exc} (run with --debug for the traceback)", "error:", "red")
        sys.exit(1)
    finally:
        signal.signal(signal.SIGTERM, previous)
