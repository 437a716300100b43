"""One request to an upstream, as the block its response lives in; the upstream's answer
read through it, and aiohttp's errors translated into rolltap's at this boundary.

:meth:`RelayClient.send <rolltap.clients.relay.RelayClient.send>` returns an
:class:`Exchange`: the request is made when the block is entered, and the connection
goes back to the pool (read through) or is closed (half read) when it ends, whatever
ends it. A plain class, not a generator-based context manager: every model call enters
one, and each generator frame is measurable on the gateway's critical path.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass

import aiohttp
from aiohttp.payload import Payload
from multidict import CIMultiDict

from rolltap.errors import (
    UpstreamConnectionError,
    UpstreamError,
    UpstreamProtocolError,
    UpstreamTimeoutError,
)

__all__ = ["Exchange", "UpstreamResponse", "translate_error"]


@dataclass(slots=True)
class UpstreamResponse:
    """The upstream's answer: status and headers at once, the body read on demand."""

    status: int
    headers: Mapping[str, str]
    _response: aiohttp.ClientResponse

    @property
    def content_type(self) -> str:
        return self._response.content_type

    async def read(self) -> bytes:
        try:
            return await self._response.read()
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise translate_error(exc) from exc

    async def read_chunk(self, silence_s: float | None = None) -> bytes | None:
        """The next body bytes as they arrive, ``b""`` at the end, or ``None`` when the
        upstream has been silent for ``silence_s`` (nothing is lost: call again)."""
        scope = asyncio.timeout(silence_s)
        try:
            async with scope:
                return await self._response.content.readany()
        except (aiohttp.ClientError, TimeoutError) as exc:
            if scope.expired():
                return None
            raise translate_error(exc) from exc

    async def iter_chunks(self) -> AsyncIterator[bytes]:
        """Yield body bytes as they arrive (no re-chunking, no buffering)."""
        try:
            async for chunk in self._response.content.iter_any():
                yield chunk
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise translate_error(exc) from exc


class Exchange:
    """``POST`` of ``body`` to ``url`` when entered; the :class:`UpstreamResponse` inside."""

    __slots__ = ("_request", "_response")

    def __init__(
        self, session: aiohttp.ClientSession, url: str, body: bytes | Payload,
        headers: CIMultiDict[str],
    ) -> None:  # fmt: skip
        self._request: tuple[aiohttp.ClientSession, str, bytes | Payload, CIMultiDict[str]] | None
        self._request = (session, url, body, headers)
        self._response: aiohttp.ClientResponse | None = None

    async def __aenter__(self) -> UpstreamResponse:
        assert self._request is not None, "an exchange is entered once"
        (session, url, body, headers), self._request = self._request, None
        try:
            response = await session.post(url, data=body, headers=headers, allow_redirects=False)
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise translate_error(exc) from exc
        if response.status in _REDIRECTS:
            response.close()
            raise _redirected(response.status, response.headers.get("Location"))
        self._response = response
        return UpstreamResponse(response.status, response.headers, response)

    async def __aexit__(self, *exc_info: object) -> None:
        response, self._response = self._response, None
        if response is None:
            return
        # release() returns a fully read connection to the pool; close() drops a
        # half-read one so its slot is freed at once (cancellation, errors).
        if response.content.at_eof():
            response.release()
        else:
            response.close()


#: what a client following redirects would resend the body on (a 301/302/303 it would
#: resend as a GET, without one)
_REDIRECTS = frozenset({301, 302, 303, 307, 308})


def _redirected(status: int, location: str | None) -> UpstreamError:
    """An endpoint that redirects its calls is a misconfigured ``base_url``: followed, each
    call would cost a round trip more, and the body sent is not kept to send again
    (:class:`~rolltap.clients.sent_body.SentOnce`)."""
    where = f" to {location}" if location else ""
    return UpstreamProtocolError(
        f"upstream answered {status}, a redirect{where}, which rolltap does not follow: "
        "set the endpoint's base_url to where it points"
    )


def translate_error(exc: BaseException) -> UpstreamError:
    """Map an aiohttp/asyncio error to rolltap's upstream error tree."""
    if isinstance(exc, TimeoutError):
        return UpstreamTimeoutError(f"upstream timed out ({type(exc).__name__})")
    if isinstance(exc, aiohttp.ClientConnectorError | aiohttp.ClientSSLError):
        return UpstreamConnectionError(f"cannot connect to upstream: {exc.os_error}")
    if isinstance(exc, aiohttp.ServerDisconnectedError | aiohttp.ClientPayloadError):
        return UpstreamProtocolError(f"upstream connection broke: {type(exc).__name__}")
    return UpstreamProtocolError(f"upstream request failed: {type(exc).__name__}: {exc}")
