"""The pool's bookkeeping: admission, slots, leases and its background tasks.

Kept apart from the public :class:`~rolltap.pool.ModelClientPool` API. All state changes
happen synchronously (in ``borrow``'s admission or in task done-callbacks), so the slot
count is exact between any two awaits: ``owned + constructing + closing <= max``. A slot
freed by an eviction's close passes straight to the construction that evicted it.
"""

from __future__ import annotations

import asyncio
import logging
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from functools import partial
from typing import Generic, TypeVar

from rolltap.errors import ModelPoolClosedError, ModelPoolFullError
from rolltap.pool._state import Build, Close, Entry
from rolltap.pool.lease import C, Lease

__all__ = ["PoolCore", "short_key"]

logger = logging.getLogger("rolltap.pool")

T = TypeVar("T")


async def _drive(call: Callable[[], Awaitable[T]]) -> T:
    """Run ``call`` inside a pool-owned task (so a synchronous raise lands in the task)."""
    return await call()


def short_key(key: str) -> str:
    """The only form of a key that may appear in messages and logs."""
    return key[:12]


class PoolCore(Generic[C]):
    """State and background tasks of a model-client pool (see ``ModelClientPool``)."""

    def __init__(self, max_clients: int, retry_after: float) -> None:
        self._max = max_clients
        self._retry_after = retry_after
        self._owned: OrderedDict[str, Entry[C]] = OrderedDict()  # least recently borrowed first
        self._injected: dict[str, Entry[C]] = {}
        self._building: dict[str, Build[C]] = {}
        self._constructing = 0
        self._closing: dict[asyncio.Task[None], Close[C]] = {}
        self._leases: dict[Lease[C], Entry[C]] = {}
        self._failures: list[BaseException] = []
        self._constructions = 0
        self._evictions = 0
        self._closed = False
        self._changed = asyncio.Event()

    # -- admission --------------------------------------------------------------------

    def _admit(
        self, key: str, build: Callable[[], Awaitable[C]], holder: str
    ) -> Lease[C] | asyncio.Future[Lease[C]]:
        """A lease at once, or a future granted when the key's construction finishes."""
        if self._closed:
            raise ModelPoolClosedError(f"model client pool is closed (holder {holder!r})")
        entry = self._owned.get(key)
        if entry is not None:
            self._owned.move_to_end(key)
            return self._lend(entry, holder)
        entry = self._injected.get(key)
        if entry is not None:
            return self._lend(entry, holder)
        pending = self._building.get(key) or self._reserve(key, build, holder)
        grant: asyncio.Future[Lease[C]] = asyncio.get_running_loop().create_future()
        pending.waiters.append((grant, holder))
        return grant

    def _reserve(self, key: str, build: Callable[[], Awaitable[C]], holder: str) -> Build[C]:
        """Claim a slot for a new key: a free one, or the one an idle client's close frees."""
        if self._failures:
            raise ModelPoolClosedError(
                "model client pool stopped creating clients after a client failed to close"
            ) from self._failures[-1]
        pending = Build(key, build)
        if len(self._owned) + self._constructing + len(self._closing) < self._max:
            self._building[key] = pending
            self._construct(pending)
            return pending
        victim = next((entry for entry in self._owned.values() if entry.leases == 0), None)
        if victim is None:
            raise ModelPoolFullError(
                f"model client pool is full: all {self._max} clients are leased, being built"
                f" or being closed (key {short_key(key)}, holder {holder!r})",
                retry_after=self._retry_after,
            )
        del self._owned[victim.key]
        self._evictions += 1
        self._building[key] = pending
        self._close(victim, successor=pending)
        return pending

    def _lend(self, entry: Entry[C], holder: str) -> Lease[C]:
        lease = Lease(entry.client, entry.key, holder, self._release)
        entry.leases += 1
        self._leases[lease] = entry
        return lease

    def _release(self, lease: Lease[C]) -> None:
        entry = self._leases.pop(lease)
        entry.leases -= 1
        if self._closed:
            self._changed.set()

    # -- background work --------------------------------------------------------------

    def _construct(self, pending: Build[C]) -> None:
        self._constructing += 1
        self._constructions += 1
        task = asyncio.get_running_loop().create_task(
            _drive(pending.build), name=f"rolltap.pool.build:{short_key(pending.key)}"
        )
        pending.task = task
        task.add_done_callback(partial(self._on_built, pending))

    def _on_built(self, pending: Build[C], task: asyncio.Task[C]) -> None:
        self._constructing -= 1
        del self._building[pending.key]
        self._changed.set()
        if task.cancelled():
            pending.fail(ModelPoolClosedError("model client pool closed during construction"))
            return
        error = task.exception()
        if error is not None:
            pending.fail(error)  # not cached: the next borrower builds again
            return
        entry = Entry(pending.key, task.result(), injected=False)
        self._owned[pending.key] = entry
        if self._closed:  # the shutdown cleanup closes it
            pending.fail(ModelPoolClosedError("model client pool closed during construction"))
            return
        for grant, holder in pending.waiters:
            if not grant.done():
                grant.set_result(self._lend(entry, holder))

    def _close(self, entry: Entry[C], successor: Build[C] | None) -> None:
        task = asyncio.get_running_loop().create_task(
            _drive(entry.client.aclose), name=f"rolltap.pool.close:{short_key(entry.key)}"
        )
        self._closing[task] = Close(entry, successor)
        task.add_done_callback(self._on_closed)

    def _on_closed(self, task: asyncio.Task[None]) -> None:
        close = self._closing.pop(task)
        self._changed.set()
        failure = task.exception() if not task.cancelled() else asyncio.CancelledError("cancelled")
        if failure is not None:
            self._failures.append(failure)
            logger.error(
                "model client %s failed to close; the pool stops creating new clients",
                short_key(close.entry.key),
                exc_info=failure,
            )
        successor = close.successor
        if successor is None:
            return
        if not (self._closed or self._failures):
            self._construct(successor)  # the freed slot passes straight to the successor
            return
        del self._building[successor.key]
        refused = ModelPoolClosedError("model client pool stopped creating clients")
        refused.__cause__ = self._failures[-1] if self._failures else None
        successor.fail(refused)
