"""One request to an upstream, as the block its response lives in.

:meth:`RelayClient.send <rolltap.clients.relay.RelayClient.send>` returns an
:class:`Exchange`: the request is written when the block is entered (on a connection of
the client's :class:`~rolltap.clients.wire_pool.WirePool`), and the connection goes back
to the pool (read through) or is closed (half read) when it ends, whatever ends it. A
plain class, not a generator-based context manager: every model call enters one, and
each generator frame is measurable on the gateway's critical path.

The endpoint's timeouts: ``total`` bounds the whole exchange (waiting for a connection,
sending, the answer read to its end), ``read`` the upstream's silence before its head
and between two pieces of its body, ``connect`` establishing a connection.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass

from rolltap.clients.sent_body import SentOnce
from rolltap.clients.wire import WireConnection, within
from rolltap.clients.wire_pool import WirePool
from rolltap.config import Timeouts
from rolltap.errors import UpstreamError, UpstreamProtocolError

__all__ = ["Exchange", "UpstreamResponse"]


@dataclass(slots=True)
class UpstreamResponse:
    """The upstream's answer: status and headers at once, the body read on demand."""

    status: int
    headers: Mapping[str, str]
    _conn: WireConnection
    _read_s: float
    _deadline: float | None

    @property
    def content_type(self) -> str:
        """The media type, lower case, without parameters (``application/octet-stream``
        when the upstream names none)."""
        value = self.headers.get("Content-Type")
        if not value:
            return "application/octet-stream"
        return value.partition(";")[0].strip().lower()

    async def read(self) -> bytes:
        return await self._conn.read_all(self._read_s, self._deadline)

    async def read_chunk(self, silence_s: float | None = None) -> bytes | None:
        """The next body bytes as they arrive, ``b""`` at the end, or ``None`` when the
        upstream has been silent for ``silence_s`` (nothing is lost: call again)."""
        loop = asyncio.get_running_loop()
        now = loop.time()
        soft = None if silence_s is None else now + silence_s
        return await self._conn.read_any(within(self._deadline, self._read_s, loop, now), soft)

    async def iter_chunks(self) -> AsyncIterator[bytes]:
        """Yield body bytes as they arrive (no re-chunking, no buffering)."""
        loop = asyncio.get_running_loop()
        while chunk := await self._conn.read_any(within(self._deadline, self._read_s, loop)):
            yield chunk


class Exchange:
    """A request of ``head`` and ``body`` on a connection of ``pool`` when entered; the
    :class:`UpstreamResponse` inside."""

    __slots__ = ("_body", "_conn", "_head", "_pool", "_timeouts")

    def __init__(
        self, pool: WirePool, head: bytes, body: bytes | SentOnce, timeouts: Timeouts
    ) -> None:
        self._pool, self._head, self._timeouts = pool, head, timeouts
        self._body: bytes | SentOnce | None = body
        self._conn: WireConnection | None = None

    async def __aenter__(self) -> UpstreamResponse:
        assert self._body is not None, "an exchange is entered once"
        body, self._body = self._body, None
        t = self._timeouts
        loop = asyncio.get_running_loop()
        deadline = None if t.total is None else loop.time() + t.total
        conn = self._conn = await self._pool.acquire(deadline)
        try:
            data = body.take() if isinstance(body, SentOnce) else body
            conn.begin(self._head + b"Content-Length: %d\r\n\r\n" % len(data), data)
            del body, data  # the connection has the bytes: a waiting call holds none
            status, headers = await conn.head(within(deadline, t.read, loop))
            if status in _REDIRECTS:
                raise _redirected(status, headers.get("Location"))
        except BaseException:  # re-raised: the connection is let go first
            self._conn = None
            self._pool.release(conn)
            raise
        return UpstreamResponse(status, headers, conn, t.read, deadline)

    async def __aexit__(self, *exc_info: object) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            # kept when read through, closed when half read (cancellation, errors) so
            # its place is free at once
            self._pool.release(conn)


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
