"""The serial writer: one task and one connection through which every write goes.

Writes queue in a bounded queue; the writer takes what has arrived together (up to
``max_batch``) and applies it in one transaction, in queue order, so each session's
writes keep their order. A caller awaits the durability of its own write. A full queue
makes callers wait up to ``busy_timeout``, then raises the retryable
:class:`~rolltap.errors.StoreBusyError`. When the connection dies the writer reconnects
with backoff and retries; after a failure that may have hit the COMMIT it asks each
write whether it already landed, so nothing is lost or written twice.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy.exc import (
    DBAPIError,
    IntegrityError,
    InterfaceError,
    OperationalError,
    SQLAlchemyError,
)
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from rolltap.errors import StoreBusyError, StoreError
from rolltap.store.errors import StoreClosedError, StoreConflictError, StoreUnavailableError
from rolltap.store.ops import CommitOp, WriteOp, apply_commits

__all__ = ["InjectedFault", "Writer", "WriterHooks", "WriterStats", "translate_db_error"]

log = logging.getLogger(__name__)


class InjectedFault(StoreError):
    """Raised by :class:`WriterHooks` in tests. ``transient`` faults act like a lost connection."""

    code = "store_injected_fault"

    def __init__(self, message: str = "injected fault", *, transient: bool = False) -> None:
        super().__init__(message)
        self.transient = transient


class WriterHooks:
    """Fault-injection points for tests; the default does nothing.

    >>> class LoseAck(WriterHooks):
    ...     async def after_commit(self, ops: Sequence[WriteOp]) -> None:
    ...         raise InjectedFault("ack lost", transient=True)
    """

    async def before_commit(self, ops: Sequence[WriteOp]) -> None:
        """Inside the transaction, after the writes, before COMMIT."""

    async def after_commit(self, ops: Sequence[WriteOp]) -> None:
        """After COMMIT returned, before callers are told (raise a *transient* fault here:
        the writes landed, so only the verify-and-retry path is correct)."""


@dataclass(frozen=True, slots=True)
class WriterStats:
    queued: int
    transactions: int
    writes: int
    reconnects: int


def translate_db_error(exc: SQLAlchemyError | OSError) -> StoreError:
    """A StoreError describing a database failure (statement and parameters left out)."""
    orig = exc.orig if isinstance(exc, DBAPIError) else exc
    detail = str(orig).splitlines()[0] if str(orig) else ""
    if isinstance(exc, IntegrityError):
        return StoreConflictError(f"conflicts with stored data: {detail}")
    return StoreError(f"database error ({type(orig).__name__}): {detail}")


def _is_transient(exc: BaseException) -> bool:
    """Worth a reconnect and retry: a lost connection, a lock timeout, a deadlock."""
    if isinstance(exc, InjectedFault):
        return exc.transient
    if isinstance(exc, DBAPIError):
        return exc.connection_invalidated or isinstance(exc, OperationalError | InterfaceError)
    return isinstance(exc, OSError)


class Writer:
    """The serial writer a :class:`~rolltap.store.Store` owns and closes."""

    def __init__(
        self,
        engine: AsyncEngine,
        *,
        queue_size: int = 1024,
        busy_timeout: float = 5.0,
        max_batch: int = 512,
        reconnect_timeout: float = 60.0,
        hooks: WriterHooks | None = None,
    ) -> None:
        self._engine = engine
        self._queue: asyncio.Queue[WriteOp | None] = asyncio.Queue(maxsize=queue_size)
        self._busy_timeout, self._max_batch = busy_timeout, max_batch
        self._reconnect_timeout = reconnect_timeout
        self.hooks = hooks or WriterHooks()
        self._conn: AsyncConnection | None = None
        self._task: asyncio.Task[None] | None = None
        self._closing = False
        self._transactions = self._writes = self._connects = 0
        self._failure: BaseException | None = None
        self._current: list[WriteOp] = []

    def start(self) -> None:
        """Start the writer task (in the running loop)."""
        self._task = asyncio.get_running_loop().create_task(self._run(), name="rolltap-writer")

    def stats(self) -> WriterStats:
        return WriterStats(
            self._queue.qsize(), self._transactions, self._writes, max(self._connects - 1, 0)
        )

    async def submit(self, op: WriteOp) -> asyncio.Future[Any]:
        """Queue ``op``; StoreBusyError if the queue stays full past the busy timeout."""
        if self._failure is not None:
            raise StoreClosedError("the store writer stopped") from self._failure
        if self._closing:
            raise StoreClosedError("the store is closed")
        try:
            if self._queue.full():
                async with asyncio.timeout(self._busy_timeout):
                    await self._queue.put(op)
            else:
                self._queue.put_nowait(op)
        except TimeoutError as exc:
            raise StoreBusyError(
                f"store write queue full for {self._busy_timeout:g}s", retry_after=1.0
            ) from exc
        if self._task is None or self._task.done():
            self._fail_queued()  # the writer is gone: nothing else will settle it
        return op.future

    async def close(self) -> None:
        """Write what is queued, then stop the task and drop the connection.

        Bound it with ``asyncio.timeout``: a close that is cancelled still cancels and
        awaits the writer task; unwritten ops then fail with StoreClosedError. Raises
        StoreClosedError if the writer had crashed.
        """
        task = self._task
        if task is None or self._closing:
            return
        self._closing = True
        try:
            if not task.done():
                await self._queue.put(None)
            await asyncio.wait({task})
        finally:
            task.cancel()
            await asyncio.wait({task})
            await self._discard_connection()
        if not task.cancelled() and task.exception() is not None:
            raise StoreClosedError("the store writer had stopped") from task.exception()

    async def _run(self) -> None:
        try:
            while True:
                batch, stop = await self._next_batch()
                self._current = batch
                if batch:
                    await self._run_group(batch)
                if stop:
                    break
        except BaseException as exc:
            self._failure = exc
            raise
        finally:
            self._settle_failed(self._current, StoreClosedError("the store writer stopped"))
            self._fail_queued()

    async def _next_batch(self) -> tuple[list[WriteOp], bool]:
        first = await self._queue.get()
        if first is None:
            return [], True
        batch = [first]
        while len(batch) < self._max_batch:
            try:
                op = self._queue.get_nowait()
            except asyncio.QueueEmpty:
                break
            if op is None:
                return batch, True
            batch.append(op)
        return batch, False

    def _fail_queued(self) -> None:
        while not self._queue.empty():
            op = self._queue.get_nowait()
            if op is not None:
                self._settle_failed([op], StoreClosedError("the store writer stopped"))

    async def _run_group(self, ops: list[WriteOp]) -> None:
        """Apply ``ops`` in one transaction, retrying through reconnects; settle each op."""
        deadline = time.monotonic() + self._reconnect_timeout
        delay, verify, pending = 0.02, False, ops
        while True:
            try:
                conn = await self._connection()
                if verify:
                    pending = await self._unapplied(conn, pending)
                if pending:
                    await self._transaction(conn, pending)
            except (SQLAlchemyError, OSError, StoreError) as exc:
                if not _is_transient(exc):
                    await self._permanent_failure(pending, exc)
                    return
                await self._discard_connection()
                if time.monotonic() + delay > deadline:
                    self._settle_failed(pending, self._unavailable(exc), cause=exc)
                    return
                log.warning("store writer: %s; reconnecting in %.2fs", type(exc).__name__, delay)
                await asyncio.sleep(delay)
                delay, verify = min(delay * 2, 2.0), True
            else:
                self._settle_ok(pending)
                return

    async def _transaction(self, conn: AsyncConnection, ops: Sequence[WriteOp]) -> None:
        now = time.time()
        async with conn.begin():
            # consecutive commits go together: one batched statement per table
            for batched, group in itertools.groupby(ops, key=lambda op: isinstance(op, CommitOp)):
                if batched:
                    await apply_commits(conn, [op for op in group if isinstance(op, CommitOp)], now)
                else:
                    for op in group:
                        await op.apply(conn, now)
            await self.hooks.before_commit(ops)
        self._transactions += 1
        await self.hooks.after_commit(ops)

    async def _unapplied(self, conn: AsyncConnection, ops: list[WriteOp]) -> list[WriteOp]:
        """Settle the ops that already landed (a COMMIT whose answer was lost); the rest."""
        pending: list[WriteOp] = []
        landed: list[WriteOp] = []
        for op in ops:
            (landed if await op.applied(conn) else pending).append(op)
        await conn.rollback()
        self._settle_ok(landed)
        return pending

    async def _permanent_failure(
        self, ops: list[WriteOp], exc: SQLAlchemyError | OSError | StoreError
    ) -> None:
        if len(ops) > 1:  # find the culprit: the others must not fail with it
            for op in list(ops):
                await self._run_group([op])
            return
        error = exc if isinstance(exc, StoreError) else translate_db_error(exc)
        self._settle_failed(ops, error, cause=exc)

    def _unavailable(self, exc: BaseException) -> StoreUnavailableError:
        return StoreUnavailableError(
            f"database unreachable for {self._reconnect_timeout:g}s ({type(exc).__name__})"
        )

    def _settle_ok(self, ops: Sequence[WriteOp]) -> None:
        for op in ops:
            self._writes += 1
            op.on_success()
            if not op.future.done():
                op.future.set_result(op.outcome())

    def _settle_failed(
        self, ops: Sequence[WriteOp], error: StoreError, cause: BaseException | None = None
    ) -> None:
        if cause is not None and error is not cause:
            error.__cause__ = cause
        for op in ops:
            if not op.future.done():
                op.on_failure()
                op.future.set_exception(error)

    async def _connection(self) -> AsyncConnection:
        if self._conn is None or self._conn.invalidated or self._conn.closed:
            self._conn = await self._engine.connect()
            self._connects += 1
            if self._engine.dialect.name == "postgresql":
                await self._conn.exec_driver_sql("SET application_name = 'rolltap-writer'")
                await self._conn.commit()
        return self._conn

    async def _discard_connection(self) -> None:
        conn, self._conn = self._conn, None
        if conn is None:
            return
        try:
            await conn.invalidate()
            await conn.close()
        except (SQLAlchemyError, OSError) as exc:
            log.debug("store writer: closing a broken connection: %s", type(exc).__name__)
