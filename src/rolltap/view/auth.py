"""The viewer's token: beyond loopback every request must carry it.

A browser opens ``/?token=T`` once; the answer sets an HttpOnly, SameSite=Strict cookie
and redirects to the same page without the token, so it stays out of history and
links. Scripts may send ``Authorization: Bearer T``. The token is compared in constant
time and never rendered into a page.
"""

from __future__ import annotations

import hmac
from collections.abc import Awaitable, Callable

from aiohttp import web
from aiohttp.typedefs import Middleware

from rolltap.errors import AuthenticationError

__all__ = ["COOKIE", "token_middleware"]

COOKIE = "rolltap_view"
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def _matches(given: str | None, token: str) -> bool:
    return given is not None and hmac.compare_digest(given.encode(), token.encode())


def _bearer(request: web.Request) -> str | None:
    header = request.headers.get("Authorization", "")
    return header[7:] if header.startswith("Bearer ") else None


def token_middleware(token: str) -> Middleware:
    """An aiohttp middleware admitting requests with ``token`` (cookie, query or header)."""

    @web.middleware
    async def check(request: web.Request, handler: Handler) -> web.StreamResponse:
        if request.path.startswith("/static/"):
            return await handler(request)  # stylesheets and scripts hold nothing private
        if _matches(request.query.get("token"), token):
            query = {k: v for k, v in request.query.items() if k != "token"}
            target = request.rel_url.with_query(query)
            response = web.HTTPSeeOther(location=str(target))
            response.set_cookie(COOKIE, token, httponly=True, samesite="Strict", path="/")
            raise response
        if _matches(request.cookies.get(COOKIE), token) or _matches(_bearer(request), token):
            return await handler(request)
        raise AuthenticationError(
            "this viewer needs its token: open /?token=<token> once (printed at start, "
            "or ROLLTAP_VIEW_TOKEN)"
        )

    return check
