"""The ``rolltap`` command line."""

from __future__ import annotations

import typer

__all__ = ["app", "main"]

app = typer.Typer(
    name="rolltap",
    help="Run LLM agent rollouts through a tapping gateway and keep every event.",
    no_args_is_help=True,
    add_completion=False,
)


def _register_commands() -> None:
    # Each command module adds its own commands; imported here so `rolltap --help`
    # lists them all.
    from rolltap.cli import eval_cmd, gateway_cmd, local_cmd, sim_cmd, store_cmd

    for module in (eval_cmd, gateway_cmd, sim_cmd, local_cmd, store_cmd):
        module.register(app)


def main() -> None:
    _register_commands()
    app()
