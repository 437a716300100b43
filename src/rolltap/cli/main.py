"""The ``rolltap`` command line."""

from __future__ import annotations

import typer

__all__ = ["app", "main", "register_commands"]

app = typer.Typer(
    name="rolltap",
    help="Run LLM agent rollouts through a tapping gateway and keep every event.",
    no_args_is_help=True,
    add_completion=False,
)


def register_commands() -> typer.Typer:
    """Add every command to ``app`` (once; later calls do nothing) and return it."""
    # Each command module adds its own commands; imported here, not at import time, so
    # `import rolltap` stays light.
    if app.registered_commands:
        return app
    from rolltap.cli import eval_cmd, gateway_cmd, local_cmd, serve_cmd, sim_cmd, store_cmd

    for module in (eval_cmd, gateway_cmd, serve_cmd, sim_cmd, local_cmd, store_cmd):
        module.register(app)
    return app


def main() -> None:
    register_commands()()
