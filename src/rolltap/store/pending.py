"""What the writer holds: pending writes, their bytes, and the places for non-commits.

Event commits are never refused; their bytes are counted so an owner can stop admitting
new work past the bound (:meth:`PendingWrites.wait_for_room`). Other writes wait for one
of ``queue_size`` places, then raise the retryable StoreBusyError.
"""

from __future__ import annotations

import asyncio

from rolltap.errors import StoreBusyError
from rolltap.store.ops import CommitOp, WriteOp

__all__ = ["PendingWrites"]


class PendingWrites:
    """Accounting of the writes accepted and not yet settled."""

    def __init__(self, *, max_bytes: int, queue_size: int, busy_timeout: float) -> None:
        self.max_bytes, self._queue_size, self._busy_timeout = max_bytes, queue_size, busy_timeout
        self._held: set[WriteOp] = set()
        self.bytes = self.commits = 0
        self._others = 0  # non-commit writes accepted and not yet taken by the writer
        self._slot_freed, self._room = asyncio.Event(), asyncio.Event()
        self._room.set()

    @property
    def over(self) -> bool:
        """Whether pending writes hold ``max_bytes`` or more."""
        return self.bytes >= self.max_bytes

    async def wait_for_room(self) -> None:
        """Return once pending writes hold less than ``max_bytes``."""
        while self.over:
            self._room.clear()
            await self._room.wait()

    def wake(self) -> None:
        """Wake the waiters of :meth:`wait_for_room` (to look at something else)."""
        self._room.set()

    async def admit(self, op: WriteOp) -> None:
        """Count ``op`` in; a non-commit write first waits for a place (StoreBusyError)."""
        if not isinstance(op, CommitOp):
            try:
                async with asyncio.timeout(self._busy_timeout):
                    while self._others >= self._queue_size:
                        self._slot_freed.clear()
                        await self._slot_freed.wait()
            except TimeoutError as exc:
                raise StoreBusyError(
                    f"store write queue full for {self._busy_timeout:g}s", retry_after=1.0
                ) from exc
            self._others += 1
        self._held.add(op)
        self.bytes += op.nbytes
        self.commits += isinstance(op, CommitOp)
        if self.over:
            self._room.clear()

    def taken(self, op: WriteOp) -> None:
        """The writer took ``op`` off its queue: a non-commit's place is free again."""
        if not isinstance(op, CommitOp):
            self._others -= 1
            self._slot_freed.set()

    def release(self, op: WriteOp) -> None:
        """``op`` was settled (durable or failed): it no longer counts. Idempotent."""
        if op in self._held:
            self._held.discard(op)
            self.bytes -= op.nbytes
            self.commits -= isinstance(op, CommitOp)
            if not self.over:
                self._room.set()
