"""A lease on a pooled model client: the borrower's handle, released exactly once."""

from __future__ import annotations

from collections.abc import Callable
from types import TracebackType
from typing import Generic, TypeVar

from rolltap.pool.client import ModelClient

__all__ = ["C", "Lease"]

C = TypeVar("C", bound=ModelClient)


class Lease(Generic[C]):
    """A borrowed model client; return it with :meth:`release` (synchronous, idempotent).

    While any lease on a client is held, the pool never evicts or closes that client.
    ``release()`` needs no ``await``, so it is safe in ``finally`` blocks and cancellation
    paths; releasing twice is harmless. A lease is also an async context manager.

    Example::

        lease = await pool.borrow(key, build, holder="rollout-7")
        try:
            await use(lease.client)
        finally:
            lease.release()

        async with await pool.borrow(key, build) as lease:
            await use(lease.client)
    """

    __slots__ = ("_client", "_holder", "_key", "_on_release", "_released")

    def __init__(
        self, client: C, key: str, holder: str, on_release: Callable[[Lease[C]], None]
    ) -> None:
        self._client = client
        self._key = key
        self._holder = holder
        self._on_release = on_release
        self._released = False

    @property
    def client(self) -> C:
        """The borrowed client; do not close it, the pool (or its owner) does."""
        return self._client

    @property
    def key(self) -> str:
        """The identity key (SHA-256 hex digest) the client was borrowed under."""
        return self._key

    @property
    def holder(self) -> str:
        """The borrower's label (e.g. a rollout id), used in error messages."""
        return self._holder

    @property
    def released(self) -> bool:
        """Whether :meth:`release` has been called."""
        return self._released

    def release(self) -> None:
        """Return the client to the pool; later calls do nothing."""
        if self._released:
            return
        self._released = True
        self._on_release(self)

    async def __aenter__(self) -> Lease[C]:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.release()

    def __repr__(self) -> str:
        state = "released" if self._released else "held"
        return f"<Lease key={self._key[:12]} holder={self._holder!r} {state}>"
