"""Keepalive connections to one upstream origin, at most ``limit`` of them open.

A :class:`WirePool` hands out a :class:`~rolltap.clients.wire.WireConnection` per
exchange: the most recently used idle one that is still open and was idle less than
:data:`KEEPALIVE_S`, else a new one while fewer than ``limit`` are open (idle, busy and
connecting together, as aiohttp's ``TCPConnector(limit=)``), else the caller waits its
turn (first come, first served) until one is given back or closes. A connection given
back mid-answer is closed, never reused.

Connecting is bounded by the endpoint's ``timeouts.connect`` and the exchange's
deadline; :func:`rolltap.clients.replicas.down_reason` reads what a connect that fails
raises (an :class:`~rolltap.errors.UpstreamTimeoutError` ``connecting``; an
:class:`~rolltap.errors.UpstreamConnectionError` from an ``OSError``).
"""

from __future__ import annotations

import asyncio
import collections
import ssl
from urllib.parse import urlsplit

from rolltap.clients.wire import WireConnection
from rolltap.errors import UpstreamConnectionError, UpstreamTimeoutError

__all__ = ["KEEPALIVE_S", "Origin", "WirePool"]

#: an idle connection older than this is closed rather than reused: a server closes its
#: idle ones after a while (llama-server after 5 s, uvicorn 5, nginx 75), and a request
#: written as it does so is lost; aiohttp keeps them 15 s and meets the same race
KEEPALIVE_S = 4.0


class Origin:
    """Where a pool connects: scheme, host, port, and the ``Host`` header to send.

    >>> o = Origin("https://api.example.com/v1")
    >>> (o.host, o.port, o.tls, o.host_header)
    ('api.example.com', 443, True, 'api.example.com')
    >>> Origin("http://[::1]:8080").host_header
    '[::1]:8080'
    """

    __slots__ = ("host", "host_header", "port", "tls")

    def __init__(self, url: str) -> None:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise UpstreamConnectionError("base_url is not an http(s) URL with a host")
        self.tls = parts.scheme == "https"
        self.host = parts.hostname
        default = 443 if self.tls else 80
        self.port = parts.port or default
        shown = f"[{self.host}]" if ":" in self.host else self.host
        self.host_header = shown if self.port == default else f"{shown}:{self.port}"


class WirePool:
    """The open connections to one :class:`Origin`, bounded by ``limit``."""

    def __init__(self, origin: Origin, *, limit: int, connect_s: float) -> None:
        self.origin, self.limit, self.connect_s = origin, limit, connect_s
        self._tls = ssl.create_default_context() if origin.tls else None
        self._idle: list[WireConnection] = []
        self._open: set[WireConnection] = set()
        self._connecting = 0
        self._waiters: collections.deque[asyncio.Future[None]] = collections.deque()
        self._closed = False

    @property
    def size(self) -> int:
        """Connections open or being opened."""
        return len(self._open) + self._connecting

    async def acquire(self, deadline: float | None) -> WireConnection:
        """A connection for one exchange; waits for a free one until ``deadline``."""
        woken = False  # a waiter woken goes before those who came after it
        while True:
            if self._closed:
                raise UpstreamConnectionError("model client is closed")
            first = woken or not self._waiters
            conn = self._take_idle() if first else None
            if conn is not None:
                return conn
            if first and self.size < self.limit:
                return await self._connect(deadline)
            await self._wait_turn(deadline, first=woken)
            woken = True

    def release(self, conn: WireConnection) -> None:
        """Give ``conn`` back: kept when its answer was read through, else closed."""
        conn.finish()
        if conn.reusable and not self._closed:
            self._idle.append(conn)
        else:
            conn.close()
            self._open.discard(conn)
        self._wake_one()

    async def aclose(self) -> None:
        """Close every connection, busy ones too, and wait until they are gone."""
        self._closed = True
        conns = list(self._open)
        self._idle.clear()
        for conn in conns:
            conn.close()
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
        for conn in conns:
            await conn.wait_closed()
        self._open.clear()

    # --- internals ------------------------------------------------------------------

    def _take_idle(self) -> WireConnection | None:
        stale = asyncio.get_running_loop().time() - KEEPALIVE_S
        while self._idle:
            conn = self._idle.pop()
            if not conn.closed and conn.idle_since >= stale:
                return conn
            conn.close()
            self._open.discard(conn)
        return None

    async def _connect(self, deadline: float | None) -> WireConnection:
        loop = asyncio.get_running_loop()
        when = loop.time() + self.connect_s
        total_first = False
        if deadline is not None and deadline < when:
            total_first, when = True, deadline
        host, port = self.origin.host, self.origin.port
        self._connecting += 1
        made = False
        try:
            async with asyncio.timeout_at(when):
                _, conn = await loop.create_connection(
                    lambda: WireConnection(loop), host, port, ssl=self._tls,
                    server_hostname=host if self._tls is not None else None,
                )  # fmt: skip
            made = True
        except TimeoutError as exc:
            if total_first:  # the call's time, not the upstream's fault
                raise UpstreamTimeoutError(
                    f"upstream timed out: the call's total time ran out connecting to {host}"
                ) from exc
            raise UpstreamTimeoutError(
                f"cannot connect to upstream {host}:{port} within {self.connect_s:g} s",
                connecting=True,
            ) from exc
        except OSError as exc:  # refused, unresolvable, no route, TLS
            raise UpstreamConnectionError(
                f"cannot connect to upstream {host}:{port}: {exc}"
            ) from exc
        finally:
            self._connecting -= 1
            if not made:
                self._wake_one()  # its place is free again
        if self._closed:
            conn.close()
            raise UpstreamConnectionError("model client is closed")
        self._open.add(conn)
        conn.on_gone(self._gone)
        return conn

    async def _wait_turn(self, deadline: float | None, *, first: bool) -> None:
        waiter = asyncio.get_running_loop().create_future()
        if first:
            self._waiters.appendleft(waiter)
        else:
            self._waiters.append(waiter)
        woken = False
        try:
            async with asyncio.timeout_at(deadline):
                await waiter
            woken = True
        except TimeoutError as exc:
            raise UpstreamTimeoutError(
                f"upstream timed out waiting for one of its {self.limit} connections"
            ) from exc
        finally:
            if waiter in self._waiters:
                self._waiters.remove(waiter)
            elif not woken and waiter.done() and not waiter.cancelled():
                self._wake_one()  # woken but gone (cancelled, timed out): pass it on

    def _wake_one(self) -> None:
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return

    def _gone(self, conn: WireConnection) -> None:
        """A connection closed (by either side): its place is free."""
        self._open.discard(conn)
        if conn in self._idle:
            self._idle.remove(conn)
        self._wake_one()
