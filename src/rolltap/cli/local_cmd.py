"""``rolltap local-model``: the built-in Gemma 3 270M behind llama-server."""

from __future__ import annotations

from typing import Annotated

import typer

from rolltap.cli.common import Interrupts, UntilSignalled, console, run_async
from rolltap.local import LocalModel

__all__ = ["register"]


async def _serve(host: str, port: int | None, until: UntilSignalled) -> None:
    async with LocalModel(host=host, port=port) as model:
        console.print(f"local model {model.model} ready: {model.base_url}")
        await until.wait()  # serve until SIGINT/SIGTERM


def local_model(
    host: Annotated[str, typer.Option(help="Bind address")] = "127.0.0.1",
    port: Annotated[int | None, typer.Option(help="Port [any free port]")] = None,
) -> None:
    """Start llama-server with the shipped Gemma 3 270M; prints its URL; Ctrl-C stops it."""
    interrupts = Interrupts()
    run_async(_serve(host, port, UntilSignalled.installed(interrupts)), interrupts)


def register(app: typer.Typer) -> None:
    app.command("local-model")(local_model)
