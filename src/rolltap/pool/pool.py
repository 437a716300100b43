"""The bounded model-client pool: leases, coalesced creation, LRU eviction, shutdown.

Every background task (construction, eviction close, shutdown cleanup) is created and
held by the pool; borrowers only ever await futures of their own, so cancelling one
borrower never cancels work that others share.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from types import TracebackType
from typing import Self

from rolltap.errors import ConfigError, ModelPoolClosedError, PoolCloseError
from rolltap.pool._core import PoolCore, short_key
from rolltap.pool._state import Entry
from rolltap.pool.lease import C, Lease
from rolltap.pool.snapshot import PoolSnapshot

__all__ = ["ModelClientPool"]


class ModelClientPool(PoolCore[C]):
    """A bounded pool of model clients shared by every rollout with the same identity.

    ``max_clients`` bounds pool-owned client instances: live ones, ones being built and
    ones being closed. Decisions where the contract leaves room:

    * Injected clients take no slot, are never evicted and never closed by the pool.
    * Eviction happens only when a new key needs a slot; the slot an evicted client's
      close frees is promised to the borrower that evicted it, so a third key finds the
      pool full (``ModelPoolFullError``) rather than queueing behind that close.
    * A construction whose waiters were all cancelled still completes; its client stays
      in the pool, idle.
    * After any client fails to close, the pool refuses new *constructions*
      (``ModelPoolClosedError``) but keeps lending live clients, and ``aclose()``
      raises ``PoolCloseError`` chained from the first failure.
    * ``aclose()`` cancels constructions in progress (their waiters get
      ``ModelPoolClosedError``), closes idle clients at once and leased ones on release.

    Example::

        async with ModelClientPool[RelayClient](max_clients=64) as pool:
            key = endpoint.identity(credential=secret, user="alice")
            async with await pool.borrow(key, build, holder="rollout-1") as lease:
                await lease.client.send(...)
    """

    def __init__(self, max_clients: int = 64, *, retry_after: float = 1.0) -> None:
        if isinstance(max_clients, bool) or not isinstance(max_clients, int) or max_clients < 1:
            raise ConfigError(f"max_clients must be a positive integer, got {max_clients!r}")
        if not retry_after > 0:
            raise ConfigError(f"retry_after must be positive, got {retry_after!r}")
        super().__init__(max_clients, retry_after)
        self._cleanup: asyncio.Task[None] | None = None

    @property
    def max_clients(self) -> int:
        """The bound on pool-owned client instances."""
        return self._max

    async def borrow(
        self, key: str, build: Callable[[], Awaitable[C]], *, holder: str = ""
    ) -> Lease[C]:
        """Lease the client for ``key``, building it with ``build()`` if there is none.

        Concurrent first borrowers of a key share one ``build()``; a failed build is not
        cached. Raises :class:`ModelPoolFullError` at once when every slot is leased or
        spoken for, and :class:`ModelPoolClosedError` after ``aclose()`` (or, for keys
        that need a new client, after a client failed to close).

        >>> lease = await pool.borrow(key, lambda: make_client(cfg), holder="r-1")  # doctest: +SKIP
        """
        ready = self._admit(key, build, holder)
        if isinstance(ready, Lease):
            return ready
        try:
            return await ready
        except BaseException:
            # Granted just before this borrower was cancelled: hand the lease back.
            if ready.done() and not ready.cancelled() and ready.exception() is None:
                ready.result().release()
            ready.cancel()
            raise

    def inject(self, key: str, client: C) -> None:
        """Lend an externally owned ``client`` under ``key``; the pool never closes it.

        Injected clients take no slot of ``max_clients`` and are never evicted.

        >>> pool.inject(fallback_key, fallback_client)  # doctest: +SKIP
        """
        if self._closed:
            raise ModelPoolClosedError("model client pool is closed")
        if key in self._owned or key in self._injected or key in self._building:
            raise ConfigError(f"pool key {short_key(key)} already has a client")
        self._injected[key] = Entry(key, client, injected=True)

    def snapshot(self) -> PoolSnapshot:
        """Counts describing the pool now (no keys, no credentials).

        >>> pool.snapshot().as_dict()  # doctest: +SKIP
        {'clients': 3, 'closing': 0, 'leases': 5, 'max_clients': 64, ...}
        """
        return PoolSnapshot(
            clients=len(self._owned),
            closing=len(self._closing),
            leases=len(self._leases),
            max_clients=self._max,
            constructions=self._constructions,
            evictions=self._evictions,
            close_failures=len(self._failures),
            injected=len(self._injected),
            building=self._constructing,
            waiting=sum(pending.waiting() for pending in self._building.values()),
            closed=self._closed,
        )

    async def aclose(self, timeout: float | None = None) -> None:  # noqa: ASYNC109 (API)
        """Stop admission, wait for every lease to be released, close every owned client.

        The cleanup runs in a pool-owned task: cancelling the caller does not interrupt
        it, and a later ``aclose()`` waits for the same cleanup. Idle clients are closed at
        once; a leased one as soon as its last lease is released. Raises
        :class:`PoolCloseError` when ``timeout`` expires first (naming the holders of
        the leases still held; leased clients stay open) or when a client's close failed.

        >>> await pool.aclose(timeout=30)  # doctest: +SKIP
        """
        self._closed = True
        if self._cleanup is None:
            self._cleanup = asyncio.get_running_loop().create_task(
                self._shut_down(), name="rolltap.pool.shutdown"
            )
        cleanup = self._cleanup
        done, _ = await asyncio.wait({cleanup}, timeout=timeout)
        if not done:
            raise PoolCloseError(self._unfinished(timeout))
        cleanup.result()
        if self._failures:
            raise PoolCloseError(
                f"{len(self._failures)} model client(s) failed to close"
            ) from self._failures[0]

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    def __repr__(self) -> str:
        snap = self.snapshot()
        return f"<ModelClientPool clients={snap.clients}/{self._max} leases={snap.leases}>"

    # -- shutdown ---------------------------------------------------------------------

    async def _shut_down(self) -> None:
        """Cancel constructions; close idle clients now and leased ones once released."""
        for pending in list(self._building.values()):
            if pending.task is not None:
                pending.task.cancel()
        while True:
            for entry in [entry for entry in self._owned.values() if entry.leases == 0]:
                del self._owned[entry.key]
                self._close(entry, successor=None)
            if not (self._owned or self._building or self._closing or self._leases):
                return
            self._changed.clear()
            await self._changed.wait()

    def _unfinished(self, timeout: float | None) -> str:
        holders = sorted({lease.holder or "<unnamed>" for lease in self._leases})
        if holders:
            return (
                f"model client pool not closed after {timeout}s: {len(self._leases)} lease(s)"
                f" still held by {', '.join(holders)}"
            )
        return (
            f"model client pool not closed after {timeout}s: {self._constructing} building,"
            f" {len(self._closing)} closing"
        )
