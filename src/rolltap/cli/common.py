"""Options and helpers shared by CLI commands."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any

import typer
from rich.console import Console
from rich.markup import escape

from rolltap.errors import RolltapError

__all__ = ["console", "err_console", "run_async"]

console = Console()
err_console = Console(stderr=True)


def run_async(main: Coroutine[Any, Any, None]) -> None:
    """Run a command's coroutine; Ctrl-C stops it cleanly, rolltap errors exit 1."""
    try:
        asyncio.run(main)
    except KeyboardInterrupt:
        err_console.print("stopped")
    except RolltapError as err:
        err_console.print(f"[red]error[/red] {escape(f'[{err.code}] {err.message}')}")
        raise typer.Exit(1) from err
