"""The ``rolltap`` command line."""

from __future__ import annotations

import sys
from typing import Annotated

import typer
from pydantic import ValidationError

from rolltap.cli.common import EXIT_SIGINT, EXIT_USAGE, exit_code_of, print_error, report_error
from rolltap.errors import RolltapError
from rolltap.rollouts.config import describe_errors

__all__ = ["app", "main", "register_commands"]

app = typer.Typer(
    name="rolltap",
    help="Run LLM agent rollouts through a tapping gateway and keep every event.",
    no_args_is_help=True,
    add_completion=False,
)


def _print_version(value: bool) -> None:
    if value:
        from rolltap.version import __version__

        typer.echo(f"rolltap {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool,
        typer.Option("--version", callback=_print_version, is_eager=True,
                     help="Print rolltap's version and exit"),
    ] = False,
) -> None:  # fmt: skip
    """Run LLM agent rollouts through a tapping gateway and keep every event."""


def register_commands() -> typer.Typer:
    """Add every command to ``app`` (once; later calls do nothing) and return it."""
    # Each command module adds its own commands; imported here, not at import time, so
    # `import rolltap` stays light.
    if app.registered_commands:
        return app
    from rolltap.cli import (
        eval_cmd,
        evalset_cmd,
        gateway_cmd,
        local_cmd,
        score_cmd,
        serve_cmd,
        sim_cmd,
        store_cmd,
        view_cmd,
    )

    for module in (
        eval_cmd,
        evalset_cmd,
        score_cmd,
        gateway_cmd,
        serve_cmd,
        sim_cmd,
        local_cmd,
        store_cmd,
        view_cmd,
    ):
        module.register(app)
    return app


def _usage_error(err: typer.TyperException) -> int:
    """A flag mistake (typer's usage errors) in one line, and where the command's help is."""
    # UsageError's ctx and exit_code (2) are public attributes; its class is not exported
    ctx: typer.Context | None = getattr(err, "ctx", None)
    if not err.format_message().strip():
        return err.exit_code  # a group called alone: typer showed its help already
    where = ctx.command_path if ctx is not None else "rolltap"
    print_error("usage_error", err.format_message(), hint=f"{where} --help")
    return err.exit_code


def main(args: list[str] | None = None) -> None:
    """The ``rolltap`` console script: every mistake one line, the exit codes in docs/cli.md."""
    command = typer.main.get_command(register_commands())
    args = sys.argv[1:] if args is None else args
    try:
        # `rolltap` alone shows the help (click would, then exit 2)
        code = command.main(args or ["--help"], prog_name="rolltap", standalone_mode=False)
    except typer.TyperException as err:
        code = _usage_error(err)
    except typer.Abort:
        code = EXIT_SIGINT
    except RolltapError as err:
        # raised outside a command's run_async (e.g. while checking its flags)
        report_error(err)
        code = exit_code_of(err)
    except ValidationError as exc:
        # a model built from flags that no command translated: still one line, exit 2
        print_error("invalid_config", describe_errors(exc))
        code = EXIT_USAGE
    sys.exit(code if isinstance(code, int) else 0)
