"""A request body let go of once it is written to the upstream's connection.

A relayed call's body is the harness's whole history (MBs for a long agent) and its
answer may take minutes. aiohttp keeps a request's payload until the response's headers
arrive; plain ``bytes`` would stay referenced for the whole call, so every call waiting
on its upstream would hold its body. :class:`SentOnce` hands its bytes to the connection
and drops them: what a waiting call holds is the kernel's socket buffer, not the
gateway's heap.

The price: a body sent once cannot be sent again, so the relay client does not follow
an upstream's redirect (it answers ``upstream_bad_response`` naming where the endpoint
points, :meth:`rolltap.clients.relay.RelayClient.send`). aiohttp never resends a
``POST`` on its own (it retries only idempotent methods).

>>> body = SentOnce(b'{"model": "m"}')
>>> body.size, body.consumed
(14, False)
"""

from __future__ import annotations

from aiohttp.abc import AbstractStreamWriter
from aiohttp.payload import Payload

__all__ = ["SentOnce"]


class SentOnce(Payload):
    """``data`` as an aiohttp payload that can be written once (then it is forgotten)."""

    def __init__(self, data: bytes) -> None:
        super().__init__(b"", content_type="application/json")
        self._data: bytes | None = data
        self._length = len(data)

    @property
    def size(self) -> int:
        return self._length

    @property
    def consumed(self) -> bool:
        """Whether it was written (aiohttp then refuses to send it again)."""
        return self._data is None

    @property
    def autoclose(self) -> bool:
        return True  # bytes in memory: nothing to close

    def decode(self, encoding: str = "utf-8", errors: str = "strict") -> str:
        return self._unsent().decode(encoding, errors)

    async def as_bytes(self, encoding: str = "utf-8", errors: str = "strict") -> bytes:
        return self._unsent()

    async def write(self, writer: AbstractStreamWriter) -> None:
        await self.write_with_length(writer, None)

    async def write_with_length(
        self, writer: AbstractStreamWriter, content_length: int | None
    ) -> None:
        data, self._data = self._unsent(), None
        await writer.write(data if content_length is None else data[:content_length])

    def _unsent(self) -> bytes:
        if self._data is None:
            raise RuntimeError("the request body was sent already and is not kept")
        return self._data
