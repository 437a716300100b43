"""What every page handler shares: rendering a template, reading query parameters."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from aiohttp import web

from rolltap.errors import UsageError
from rolltap.store import Store
from rolltap.view.keys import CONFIG, JINJA, STORE

__all__ = ["Handler", "float_param", "int_param", "page", "store_of"]

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
