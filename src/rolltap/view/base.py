"""What every page handler shares: rendering a template, reading query parameters."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from aiohttp import web
from sqlalchemy.ext.asyncio import AsyncConnection

from rolltap.errors import UsageError
from rolltap.store import (
    RunInfo,
    SessionInfo,
    Store,
    StoreNotFoundError,
    fetch_run,
    fetch_session,
)
from rolltap.view.keys import CONFIG, JINJA, STORE

__all__ = [
    "Handler",
    "float_param",
    "int_param",
    "page",
    "run_of",
    "session_of",
    "store_of",
]

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def page(
    request: web.Request, template: str, context: Mapping[str, Any], *, status: int = 200
) -> web.Response:
    """``template`` rendered with ``context`` (and the request's path) as HTML."""
    env = request.app[JINJA]
    body = env.get_template(template).render(
        **context, path=request.path, has_service=request.app[CONFIG].serve is not None
    )
    return web.Response(text=body, status=status, content_type="text/html", charset="utf-8")


def store_of(request: web.Request) -> Store:
    return request.app[STORE]


async def run_of(conn: AsyncConnection, store: Store, given: str) -> RunInfo:
    """The run ``given`` names: its whole id (one indexed read), else a unique prefix."""
    try:
        return await fetch_run(conn, given)
    except StoreNotFoundError:
        return await fetch_run(conn, await store.resolve_run_id(given))


async def session_of(conn: AsyncConnection, store: Store, given: str) -> SessionInfo:
    """The session ``given`` names, as :func:`run_of` (a prefix LIKE scans on SQLite)."""
    try:
        return await fetch_session(conn, given)
    except StoreNotFoundError:
        return await fetch_session(conn, await store.resolve_session_id(given))


def int_param(request: web.Request, name: str, default: int = 0) -> int:
    """A non-negative whole-number query parameter; UsageError (400) for anything else."""
    raw = request.query.get(name)
    if not raw:
        return default
    try:
        return max(int(raw), 0)
    except ValueError:
        raise UsageError(f"{name} must be a whole number, not {raw!r}") from None


def float_param(request: web.Request, name: str) -> float | None:
    raw = request.query.get(name, "").strip()
    if not raw:
        return None
    try:
        return float(raw)
    except ValueError:
        raise UsageError(f"{name} must be a number, not {raw!r}") from None
