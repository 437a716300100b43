"""Reading a request body: bounded in size and in time, never kept on the request."""

from __future__ import annotations

import asyncio

from aiohttp import web

from rolltap.errors import BodyTooLargeError, InvalidRequestError, RequestTimeoutError

__all__ = ["read_body"]


async def read_body(request: web.Request, limit: int, *, timeout_s: float) -> bytes:
    """The request body, at most ``limit`` bytes (else 413), received within
    ``timeout_s`` of being asked for (else ``408 request_timeout``)."""
    length = request.content_length
    if length is not None and length > limit:
        raise BodyTooLargeError(f"request body of {length} bytes is over the {limit}-byte limit")
    # Read the stream ourselves: Request.read() keeps the bytes on the request for as
    # long as the handler runs — MBs per call for a long multimodal history.
    body = bytearray()
    try:
        async with asyncio.timeout(timeout_s):
            first = await request.content.readany()
            if len(first) == length and request.content.at_eof():
                return first  # all of it in one piece: no copy
            body += first
            while chunk := await request.content.readany():
                body += chunk
                if len(body) > limit:
                    raise BodyTooLargeError(f"request body is over the {limit}-byte limit")
    except TimeoutError:
        raise RequestTimeoutError(
            f"request body not received within {timeout_s:g}s ({len(body)} bytes came)"
        ) from None
    except web.RequestPayloadError as exc:
        # a body aiohttp could not decode (a bad Content-Encoding, broken chunking)
        raise InvalidRequestError(f"unreadable request body: {exc}") from exc
    return bytes(body)
