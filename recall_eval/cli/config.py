"""`recall-eval config show COMMAND [OPTIONS...]`: the effective configuration of a command line (its
--config run file, then its flags over it, then the defaults), printed as a run file."""

from __future__ import annotations

from typing import Annotated

import typer

from recall_eval.cli.app import app
from recall_eval.errors import BadInput

config_app = typer.Typer(
    help="Run files: the options of a command in TOML (--config FILE).", no_args_is_help=True
)
app.add_typer(config_app, name="config")


@config_app.command("show", context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
def show(
    ctx: typer.Context,
    command: Annotated[
        str,
        typer.Argument(
            metavar="COMMAND",
            help="The command whose options to resolve: sweep or compare.",
            show_default=False,
        ),
    ],
) -> None:
    """Print the effective configuration of COMMAND with the options that follow it, e.g.
    `recall-eval config show sweep --config run.toml --trials 1`: every option, from the command line,
    else the run file, else its default, as a run file (TOML) that --config reads back. Secrets
    (--api-key, --header) are left out."""
    from recall_eval.api.run_file import options_document, to_toml
    from recall_eval.cli.options import BUILDERS, CONTEXT_PARAM

    root = typer.main.get_command(app)
    target = root.get_command(ctx, command) if isinstance(root, typer.core.TyperGroup) else None
    if target is None or command not in BUILDERS:
        raise BadInput(
            f"config show {command!r}: give a command that takes options: {', '.join(sorted(BUILDERS))}"
        )
    parsed = target.make_context(command, list(ctx.args), parent=ctx)
    values = dict(parsed.params)
    values.pop(CONTEXT_PARAM, None)
    source = parsed.get_parameter_source
    objects = BUILDERS[command](
        values, lambda name: (s := source(name)) is not None and s.name == "COMMANDLINE"
    )
    print(to_toml(*options_document(*objects.values())), end="")
