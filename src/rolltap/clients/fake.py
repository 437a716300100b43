"""A scripted upstream for tests: it answers from a list and sends nothing anywhere.

Each :class:`FakeReply` is one answer: a status, headers and the body's pieces in the
order they arrive. A piece is bytes, ``None`` (the upstream stays silent for one
keepalive period), an :class:`asyncio.Event` (the body waits until the test sets it:
whatever came before has been delivered by then if the gateway relays as it goes) or
an exception (raised where it stands, as a connection breaking mid-body). A reply with
``refuse`` raises it from :meth:`FakeUpstream.call` instead of answering.

>>> fake = FakeUpstream("chat", [FakeReply.json({"choices": [], "usage": None})])
>>> fake.name
'chat'
"""

from __future__ import annotations

import asyncio
import functools
from collections import deque
from collections.abc import AsyncIterator, Iterable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import orjson

from rolltap.clients.relay_upstream import translated
from rolltap.clients.upstream import (
    Answer,
    ModelRequest,
    Reply,
    ReplyKind,
    UpstreamRequest,
)
from rolltap.dialects.registry import get_dialect
from rolltap.dialects.translate import Unsupported
from rolltap.errors import RolltapError, UpstreamConnectionError
from rolltap.http.json_body import upstream_json_object

__all__ = ["FakeBody", "FakeReply", "FakeUpstream", "Piece"]

#: one piece of a scripted body (see the module's docstring)
Piece = bytes | None | asyncio.Event | BaseException


@dataclass(slots=True)
class FakeReply:
    """One scripted answer."""

    status: int = 200
    pieces: Sequence[Piece] = ()
    kind: ReplyKind = "body"
    headers: dict[str, str] = field(default_factory=dict)
    #: what an ``answer`` reply parses to
    answer: Answer | None = None
    #: raised by :meth:`FakeUpstream.call` instead of answering (a refused connection)
    refuse: RolltapError | None = None

    @classmethod
    def json(
        cls, body: dict[str, Any], *, status: int = 200, headers: dict[str, str] | None = None
    ) -> FakeReply:
        """A JSON body, in one piece."""
        return cls(status, (orjson.dumps(body),), headers=dict(headers or {}))

    @classmethod
    def events(cls, *pieces: Piece) -> FakeReply:
        """A server-sent event stream, the frames as given."""
        return cls(200, pieces, kind="stream")


class FakeBody:
    """A scripted body, read as an upstream's is."""

    def __init__(self, pieces: Iterable[Piece]) -> None:
        self._pieces = deque(pieces)

    async def read(self) -> bytes:
        out = []
        while (chunk := await self.read_chunk()) != b"":
            out.append(chunk or b"")
        return b"".join(out)

    async def read_chunk(self, silence_s: float | None = None) -> bytes | None:
        while self._pieces:
            piece = self._pieces.popleft()
            if isinstance(piece, asyncio.Event):
                await piece.wait()
                continue
            if isinstance(piece, BaseException):
                raise piece
            return piece
        return b""


class FakeUpstream:
    """An :class:`~rolltap.clients.upstream.Upstream` that answers from ``replies``.

    It speaks ``dialect`` (a harness of another dialect is translated as the relay
    upstream does, under ``unsupported``, what was dropped recorded) and rewrites nothing
    else. ``requests`` keeps what it was sent; a call with
    no reply left is refused (``upstream_unreachable``). ``rewrite_error``, when set,
    is raised by :meth:`rewrite` (a call this upstream cannot express).
    """

    def __init__(
        self, dialect: str = "chat", replies: Iterable[FakeReply] = (),
        *, unsupported: Unsupported = "drop",
    ) -> None:  # fmt: skip
        self.dialect = get_dialect(dialect)
        self.unsupported: Unsupported = unsupported
        self.name: str = self.dialect.name
        self.replies = deque(replies)
        self.requests: list[UpstreamRequest] = []
        self.rewrite_error: RolltapError | None = None

    async def rewrite(self, call: ModelRequest) -> UpstreamRequest:
        if self.rewrite_error is not None:
            raise self.rewrite_error
        if call.dialect.name == self.name:
            return UpstreamRequest(call, call.body, [])
        body, dropped, _ = translated(call, self.name, self.unsupported)
        return UpstreamRequest(call, body, dropped)

    @asynccontextmanager
    async def call(self, request: UpstreamRequest) -> AsyncIterator[Reply]:
        self.requests.append(request)
        if not self.replies:
            raise UpstreamConnectionError("the fake upstream has no reply left")
        reply = self.replies.popleft()
        if reply.refuse is not None:
            raise reply.refuse
        headers = dict(reply.headers)
        yield Reply(
            reply.status, headers, reply.kind, self.dialect, FakeBody(reply.pieces),
            functools.partial(_parse, reply), retry_after=headers.get("Retry-After"),
        )  # fmt: skip


async def _parse(reply: FakeReply, raw: bytes) -> Answer:
    if reply.answer is not None:
        return reply.answer
    return Answer(upstream_json_object(raw), raw)
