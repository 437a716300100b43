"""rolltap errors as HTTP answers, in whichever error shape the route speaks.

An error shape is a function from a :class:`~rolltap.errors.RolltapError` to the body
bytes (each dialect has one, e.g. :func:`rolltap.dialects.chat.check.error_body`);
this module knows none of them, so it sits below the dialects. :func:`error_middleware`
is the one middleware every rolltap application (the gateway's servers, the serve API)
answers its errors through.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from aiohttp import web
from aiohttp.typedefs import Middleware

from rolltap.errors import (
    BodyTooLargeError,
    MethodNotAllowedError,
    NotFoundError,
    RolltapError,
    http_status_of,
)

__all__ = ["ErrorShape", "error_middleware", "error_response", "from_http_exception"]

#: an error's body in one wire format
ErrorShape = Callable[[RolltapError], bytes]
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def error_response(err: RolltapError, shape: ErrorShape) -> web.Response:
    """``err`` as an HTTP response: its status, ``shape``'s body, ``Retry-After`` when
    the error is retryable after a delay."""
    headers = {}
    if err.retry_after is not None:
        headers["Retry-After"] = str(max(1, round(err.retry_after)))
    return web.Response(
        body=shape(err), status=http_status_of(err), headers=headers,
        content_type="application/json",
    )  # fmt: skip


def from_http_exception(exc: web.HTTPException) -> RolltapError:
    """aiohttp's own HTTP error (no route, wrong method, body over ``client_max_size``)
    as the rolltap error with the stable code."""
    if exc.status == 404:
        return NotFoundError("no such route")
    if exc.status == 405:
        return MethodNotAllowedError(f"method not allowed: {exc.reason}")
    if exc.status == 413:
        return BodyTooLargeError("request body is over the limit")
    return RolltapError(f"HTTP {exc.status}: {exc.reason}")


def error_middleware(shape_of: Callable[[web.Request], ErrorShape]) -> Middleware:
    """A middleware answering every rolltap error, and aiohttp's HTTP errors (status
    400 and up), in the error shape ``shape_of`` picks for the request."""

    @web.middleware
    async def errors(request: web.Request, handler: Handler) -> web.StreamResponse:
        try:
            return await handler(request)
        except RolltapError as err:
            return error_response(err, shape_of(request))
        except web.HTTPException as exc:
            if exc.status < 400:
                raise
            return error_response(from_http_exception(exc), shape_of(request))

    return errors
