"""A request body let go of once it is handed to the upstream's connection.

A relayed call's body is the harness's whole history (MBs for a long agent) and its
answer may take minutes. Held by the call as plain ``bytes``, every call waiting on its
upstream would hold its body. :class:`SentOnce` gives its bytes to the connection
(:meth:`take`) and forgets them: what a waiting call holds is the kernel's socket
buffer, not the gateway's heap.

The price: a body sent once cannot be sent again, so the relay client does not follow
an upstream's redirect (it answers ``upstream_bad_response`` naming where the endpoint
points, :meth:`rolltap.clients.relay.RelayClient.send`), and never resends a request.

>>> body = SentOnce(b'{"model": "m"}')
>>> body.size, body.consumed
(14, False)
>>> body.take(), body.consumed
(b'{"model": "m"}', True)
"""

from __future__ import annotations

__all__ = ["SentOnce"]


class SentOnce:
    """``data`` that can be taken once (then it is forgotten)."""

    __slots__ = ("_data", "size")

    def __init__(self, data: bytes) -> None:
        self._data: bytes | None = data
        self.size = len(data)

    @property
    def consumed(self) -> bool:
        """Whether it was taken to be sent."""
        return self._data is None

    def take(self) -> bytes:
        """The bytes, once."""
        data, self._data = self._data, None
        if data is None:
            raise RuntimeError("the request body was sent already and is not kept")
        return data
