"""Reading a request body: bounded in size and in time, never kept on the request."""

from __future__ import annotations

import asyncio

from aiohttp import StreamReader, web

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
    content = request.content
    try:
        if content.is_eof():  # all of it has arrived: there is nothing to time
            return await _read(content, length, limit)
        async with asyncio.timeout(timeout_s):
            return await _read(content, length, limit)
    except TimeoutError:
        raise RequestTimeoutError(
            f"request body not received within {timeout_s:g}s ({content.total_bytes} bytes came)"
        ) from None
    except web.RequestPayloadError as exc:
        # a body aiohttp could not decode (a bad Content-Encoding, broken chunking)
        raise InvalidRequestError(f"unreadable request body: {exc}") from exc


async def _read(content: StreamReader, length: int | None, limit: int) -> bytes:
    first = await content.readany()
    if len(first) == length and content.at_eof():
        return first  # all of it in one piece: no copy
    # pieces joined once at the end: one allocation of the body's size (a growing
    # buffer would be copied as it grows, and copied again into bytes)
    pieces, size = [first], len(first)
    while piece := await content.readany():
        size += len(piece)
        if size > limit:
            raise BodyTooLargeError(f"request body is over the {limit}-byte limit")
        pieces.append(piece)
    return b"".join(pieces)
