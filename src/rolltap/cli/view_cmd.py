"""``rolltap view``: the read-only web viewer over a store (see docs/cli.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from rolltap.cli.common import EXIT_OK, Interrupts, UntilSignalled, console, run_async
from rolltap.store import Store, mask_url, resolve_store_url
from rolltap.view import TOKEN_ENV, ViewConfig, ViewServer

__all__ = ["register"]


async def _view(config: ViewConfig, until: UntilSignalled) -> int:
    """Serve until a signal; a store that is missing or outdated is one line, exit 1."""
    url = resolve_store_url(config.store)
    # read only: never create a store; SQLite upgrades itself, a server needs `db upgrade`
    async with await Store.open(url, create=False) as store:
        token, generated = config.resolved_token()
        async with ViewServer(store, config, token) as server:
            # one line a parser can rely on: tests and scripts read the URL from it
            console.print(f"rolltap view: {server.url}", soft_wrap=True, highlight=False)
            console.print(f"store {mask_url(store.url)} (read only)", highlight=False)
            if generated:
                console.print(f"token: {token}  (set {TOKEN_ENV} to fix it)", highlight=False)
            if token:
                console.print(
                    f"open {server.url}?token=<token> once; the browser keeps it in a cookie",
                    soft_wrap=True, highlight=False,
                )  # fmt: skip
            await until.wait()
    console.print("rolltap view: stopped", highlight=False)
    return EXIT_OK


def view(
    store: Annotated[
        str | None, typer.Option(help="sqlite:///f.db, postgresql://…, mysql://… [ROLLTAP_STORE]")
    ] = None,
    host: Annotated[
        str | None, typer.Option(help="Bind address [127.0.0.1]; any other needs a token")
    ] = None,
    port: Annotated[int | None, typer.Option(help="Port [7575; 0: any]")] = None,
    serve: Annotated[
        str | None,
        typer.Option(help="A rolltap serve URL for the Service page (token: ROLLTAP_SERVE_TOKEN)"),
    ] = None,
    config: Annotated[Path | None, typer.Option(help="TOML with a \\[view] table")] = None,
) -> None:
    """Browse runs, rollouts, transcripts and token data in a web browser (read only)."""
    values: dict[str, Any] = {"store": store, "host": host, "port": port, "serve": serve}
    if config is not None:
        settings = ViewConfig.from_toml(config, **values)
    else:
        settings = ViewConfig.build({k: v for k, v in values.items() if v is not None})
    interrupts = Interrupts()
    until = UntilSignalled.installed(interrupts)
    run_async(_view(settings, until), interrupts)


def register(app: typer.Typer) -> None:
    app.command("view")(view)
