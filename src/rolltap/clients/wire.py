"""One HTTP/1.1 connection to an upstream: a request written at once, its answer parsed in C.

The model calls' transport (:mod:`rolltap.clients.wire_pool` pools these connections,
:class:`~rolltap.clients.exchange.Exchange` makes one request on one). aiohttp stays the
gateway's server and every other client; a model call is the one request the gateway
makes thousands of times a second, and aiohttp's client spends ~100 µs of Python on each
(its request and response objects, URL handling, cookie jar, tracing hooks) against
~15 µs for writing the request and parsing the answer with llhttp (``httptools``) here —
see docs/benchmarks.md, "The model calls' own client".

A connection carries one exchange at a time: :meth:`WireConnection.begin` writes the
request's head and body in one call (no copy of the body); the answer's head is awaited
with :meth:`WireConnection.head`, its body with :meth:`WireConnection.read_any` (what has
arrived, ``b""`` at its end) or :meth:`WireConnection.read_all`. A body read piece by piece
is never buffered past :data:`HIGH_WATER` bytes: reading from the socket pauses until the
reader takes them, so a slow harness holds the upstream's stream in the kernel, not here.

Every failure is rolltap's: a broken connection or an answer that is not HTTP is
:class:`~rolltap.errors.UpstreamProtocolError`, silence past a deadline
:class:`~rolltap.errors.UpstreamTimeoutError`.
"""

from __future__ import annotations

import asyncio
import collections
from collections.abc import Callable
from typing import Any, cast

import httptools
from multidict import CIMultiDict

from rolltap.errors import UpstreamError, UpstreamProtocolError, UpstreamTimeoutError

__all__ = ["HIGH_WATER", "MAX_HEAD_BYTES", "WireConnection", "within"]

#: body bytes buffered before reading from the socket pauses (a piecewise reader only)
HIGH_WATER = 256 * 1024
#: an answer's head larger than this is refused (aiohttp's limit is 8 KiB a line)
MAX_HEAD_BYTES = 256 * 1024


class WireConnection(asyncio.Protocol):
    """An HTTP/1.1 client connection: one exchange at a time, kept alive between them."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._parser = httptools.HttpResponseParser(self)
        self._transport: asyncio.Transport | None = None
        #: resolved when the connection is gone (:meth:`wait_closed`)
        self._gone: asyncio.Future[None] = loop.create_future()
        self._usable = True  # False once it is being closed, before it is gone
        self.idle_since = loop.time()
        self._busy = False  # an exchange is under way
        self._raw_headers: list[tuple[bytes, bytes]] = []
        self._head_bytes = 0
        self._interim = False  # a 1xx answer before the real one: skipped
        self._head: asyncio.Future[tuple[int, CIMultiDict[str]]] | None = None
        self._chunks: collections.deque[bytes] = collections.deque()
        self._buffered = 0
        self._paused = False
        self._whole = False  # the reader takes the body at its end: never pause
        self._waiter: asyncio.Future[None] | None = None
        #: the future a wait is on, until when, and the timer that ends it then
        self._expiring: asyncio.Future[Any] | None = None
        self._wait_until: float | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._complete = False
        self._until_close = False
        self._error: UpstreamError | None = None
        self.keep_alive = False

    # --- the state a pool reads ---------------------------------------------------

    @property
    def closed(self) -> bool:
        return not self._usable or self._gone.done()

    @property
    def reusable(self) -> bool:
        """Its last answer was read to the end and the upstream keeps the connection."""
        return self._complete and self.keep_alive and self._error is None and not self.closed

    @property
    def buffered(self) -> int:
        """Body bytes arrived and not yet read."""
        return self._buffered

    @property
    def paused(self) -> bool:
        """Whether reading from the socket waits for the reader (:data:`HIGH_WATER`)."""
        return self._paused

    def close(self) -> None:
        self._usable = False
        if self._transport is not None:
            self._transport.close()

    async def wait_closed(self) -> None:
        await asyncio.shield(self._gone)

    def on_gone(self, callback: Callable[[WireConnection], None]) -> None:
        """Call ``callback`` with this connection once it is closed (by either side)."""
        self._gone.add_done_callback(lambda _: callback(self))

    # --- one exchange --------------------------------------------------------------

    def begin(self, head: bytes, body: bytes) -> None:
        """Write a request (``head`` ends with its blank line) and expect its answer."""
        assert self._transport is not None, "connected"
        assert not self._busy, "one exchange at a time"
        self._busy, self._complete, self._until_close, self.keep_alive = True, False, False, False
        self._raw_headers, self._head_bytes = [], 0
        self._chunks.clear()
        self._buffered, self._whole, self._error = 0, False, None
        self._head = self._loop.create_future()
        self._transport.writelines((head, body) if body else (head,))

    async def head(self, deadline: float | None) -> tuple[int, CIMultiDict[str]]:
        """The answer's status and headers, awaited until ``deadline`` (loop time)."""
        assert self._head is not None
        if not self._head.done():
            await self._until(self._head, deadline, "the answer's headers")
        return self._head.result()

    async def read_any(self, deadline: float | None, soft: float | None = None) -> bytes | None:
        """The body bytes that have arrived, ``b""`` once it has all been read. Waits for
        some until ``deadline`` (then fails), or until ``soft`` if that comes first (then
        returns None: nothing is lost, call again)."""
        while not self._chunks:
            if self._error is not None:
                raise self._error
            if self._complete:
                return b""
            if not await self._until(self._wait(), deadline, "the answer's body", soft):
                return None
        data = self._take()
        self._resume()
        return data

    async def read_all(self, silence_s: float | None, deadline: float | None) -> bytes:
        """The whole body; the upstream may be silent ``silence_s`` at most between two
        pieces of it."""
        self._whole = True
        self._resume()
        while not self._complete:
            if self._error is not None:
                raise self._error
            when = deadline if silence_s is None else within(deadline, silence_s, self._loop)
            await self._until(self._wait(), when, "the answer's body")
        if self._error is not None:
            raise self._error
        return self._take()

    def _take(self) -> bytes:
        """The body bytes arrived, taken."""
        chunks = self._chunks
        data = chunks.popleft() if len(chunks) == 1 else b"".join(chunks)
        chunks.clear()
        self._buffered = 0
        return data

    def _resume(self) -> None:
        if self._paused and self._transport is not None:
            self._paused = False
            self._transport.resume_reading()

    def finish(self) -> None:
        """The exchange is over (read through or given up): the connection is idle."""
        self._disarm()
        self._busy = False
        self._head = None
        self.idle_since = self._loop.time()

    def _wait(self) -> asyncio.Future[None]:
        self._waiter = self._loop.create_future()
        return self._waiter

    async def _until(
        self, future: asyncio.Future[Any], hard: float | None, what: str,
        soft: float | None = None,
    ) -> bool:  # fmt: skip
        """Wait for ``future``: False once ``soft`` passes first; past ``hard`` the
        exchange fails (the connection is closed).

        One timer serves every wait of an exchange: a wait that ends later than the timer
        leaves it armed, and the timer, firing early, re-arms itself for the wait then
        under way — a stream's chunks arm none (``asyncio.timeout`` would schedule and
        cancel a timer for each)."""
        soft_first = soft is not None and (hard is None or soft < hard)
        when = self._wait_until = soft if soft_first else hard
        if when is not None:
            timer = self._timer
            if timer is None or timer.when() > when:
                if timer is not None:
                    timer.cancel()
                self._timer = self._loop.call_at(when, self._expire)
        self._expiring = future
        try:
            await future
        except _Expired:
            if soft_first:
                return False
            error = UpstreamTimeoutError(f"upstream timed out waiting for {what}")
            self._fail(error)
            self.close()
            raise error from None
        finally:
            self._waiter = self._expiring = None
        return True

    def _expire(self) -> None:
        self._timer = None
        future, when = self._expiring, self._wait_until
        if future is None or future.done() or when is None:
            return
        if self._loop.time() < when:  # armed for an earlier wait
            self._timer = self._loop.call_at(when, self._expire)
            return
        future.set_exception(_Expired())

    def _disarm(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def _fail(self, error: UpstreamError) -> None:
        if self._error is None and self._busy and not self._complete:
            self._error = error
            if self._head is not None and not self._head.done():
                self._head.set_exception(error)
                self._head.exception()  # retrieved: a caller that gave up never awaits it
            self._wake()

    # --- asyncio.Protocol ----------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports are not asyncio.Transport subclasses, but have its methods
        self._transport = cast(asyncio.Transport, transport)

    def data_received(self, data: bytes) -> None:
        if not self._busy:  # bytes no request asked for: the connection is unusable
            self.close()
            return
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            self._fail(UpstreamProtocolError("upstream switched protocols"))
            self.close()
        except httptools.HttpParserError as exc:
            self._fail(UpstreamProtocolError(f"upstream answered with no valid HTTP: {exc}"))
            self.close()

    def eof_received(self) -> bool:
        return False  # close: an upstream that stops sending is done with the connection

    def connection_lost(self, exc: Exception | None) -> None:
        if self._busy and not self._complete:
            if self._head is not None and self._head.done() and self._until_close:
                self._complete = True  # a body without a length ends with its connection
                self._wake()
            else:
                why = "before its answer's headers" if not _done(self._head) else "mid-body"
                cause = f" ({type(exc).__name__})" if exc is not None else ""
                self._fail(UpstreamProtocolError(f"upstream connection broke {why}{cause}"))
        self._disarm()
        if not self._gone.done():
            self._gone.set_result(None)

    def pause_writing(self) -> None:  # the body is written whole: nothing to hold back
        pass

    def resume_writing(self) -> None:
        pass

    # --- httptools' callbacks --------------------------------------------------------

    def on_message_begin(self) -> None:
        if self._complete:  # a second answer to one request: stop; the connection closes
            raise UpstreamProtocolError("upstream answered one request twice")

    def on_header(self, name: bytes, value: bytes) -> None:
        self._head_bytes += len(name) + len(value)
        if self._head_bytes > MAX_HEAD_BYTES:
            error = UpstreamProtocolError("upstream's answer headers are too large")
            self._fail(error)  # first: the parser reports a callback's error as its own
            raise error
        self._raw_headers.append((name, value))

    def on_headers_complete(self) -> None:
        status = self._parser.get_status_code()
        if 100 <= status < 200:
            self._interim, self._raw_headers, self._head_bytes = True, [], 0
            return
        headers: CIMultiDict[str] = CIMultiDict(
            (n.decode("utf-8", "surrogateescape"), v.decode("utf-8", "surrogateescape"))
            for n, v in self._raw_headers
        )
        self._raw_headers = []
        self._until_close = (
            status not in (204, 304)
            and "Content-Length" not in headers
            and "chunked" not in headers.get("Transfer-Encoding", "").lower()
        )
        if self._head is not None and not self._head.done():
            self._head.set_result((status, headers))

    def on_body(self, body: bytes) -> None:
        if self._interim:
            return
        self._chunks.append(body)
        self._buffered += len(body)
        if self._buffered > HIGH_WATER and not self._whole and not self._paused:
            self._paused = True
            assert self._transport is not None
            self._transport.pause_reading()
        self._wake()

    def on_message_complete(self) -> None:
        if self._interim:
            self._interim = False
            return
        self._complete = True
        self.keep_alive = self._parser.should_keep_alive()
        self._wake()


class _Expired(Exception):
    """A wait's time is up (raised into the future it was on)."""


def _done(future: asyncio.Future[Any] | None) -> bool:
    return future is not None and future.done() and not future.cancelled()


def within(
    deadline: float | None, seconds: float, loop: asyncio.AbstractEventLoop,
    now: float | None = None,
) -> float:  # fmt: skip
    """``seconds`` from ``now`` (the loop's time by default), or ``deadline`` if sooner."""
    when = (loop.time() if now is None else now) + seconds
    return when if deadline is None or deadline > when else deadline
