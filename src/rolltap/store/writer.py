"""The serial writer: one task and one connection through which every write goes.

Writes that arrived together go in one transaction, in queue order, so each session's
writes keep their order; a caller awaits the durability of its own write. Event commits
are never refused (the store queues at most one per session, so they hold at most the
sessions' unpersisted events); their bytes are counted for :meth:`Writer.wait_for_room`.
Other writes wait for one of ``queue_size`` places up to ``busy_timeout``, then raise
the retryable :class:`~rolltap.errors.StoreBusyError`.

When the connection dies — or the server is stopped — the writer holds every pending
write and reconnects with backoff; after a failure that may have hit the COMMIT it asks
each write whether it already landed, so nothing is lost or written twice. Once the
database has been away for ``reconnect_timeout`` pending and new writes fail with
:class:`~rolltap.store.errors.StoreUnavailableError` until a probe connects again.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import time
from collections.abc import Sequence
from typing import Any

from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from rolltap.errors import StoreError
from rolltap.store.dberrors import database_errors, is_transient, translate_db_error
from rolltap.store.errors import StoreClosedError, StoreFullError, StoreUnavailableError
from rolltap.store.ops import WriteOp
from rolltap.store.pending import PendingWrites
from rolltap.store.url import backend_of, mask_url
from rolltap.store.writer_conn import WriterConnection
from rolltap.store.writer_state import (
    DEFAULT_UNAVAILABLE_TIMEOUT_S,
    InjectedFault,
    WriterHooks,
    WriterStats,
    env_pending_max_bytes,
)

__all__ = ["InjectedFault", "Writer", "WriterHooks", "WriterStats", "translate_db_error"]

log = logging.getLogger(__name__)


def _transient(exc: BaseException) -> bool:
    if isinstance(exc, InjectedFault):
        return exc.transient
    return not isinstance(exc, StoreError) and is_transient(exc)


class Writer:
    """The serial writer a :class:`~rolltap.store.Store` owns and closes."""

    def __init__(
        self,
        engine: AsyncEngine,
        *,
        queue_size: int = 1024,
        busy_timeout: float = 5.0,
        max_batch: int = 512,
        reconnect_timeout: float = DEFAULT_UNAVAILABLE_TIMEOUT_S,
        pending_max_bytes: int | None = None,
        hooks: WriterHooks | None = None,
    ) -> None:
        self._engine = engine
        self._queue: asyncio.Queue[WriteOp | None] = asyncio.Queue()
        self._pending = PendingWrites(
            max_bytes=pending_max_bytes or env_pending_max_bytes(),
            queue_size=queue_size, busy_timeout=busy_timeout,
        )  # fmt: skip
        self._close_requested, self._available = asyncio.Event(), asyncio.Event()
        self._available.set()
        self._max_batch, self._reconnect_timeout = max_batch, reconnect_timeout
        self._down_since: float | None = None
        #: when a write last failed because the database is full (monotonic)
        self._full_at: float | None = None
        self._gave_up: StoreUnavailableError | None = None
        self.hooks = hooks or WriterHooks()
        self._conn = WriterConnection(engine)
        self._task: asyncio.Task[None] | None = None
        self._closing = False
        self._transactions = self._writes = 0
        self._failure: BaseException | None = None
        self._current: list[WriteOp] = []
        path = engine.url.database if backend_of(engine.url) == "sqlite" else None
        self._where = f"store file {path}" if path else f"database {mask_url(engine.url)}"

    def start(self) -> None:
        """Start the writer task (in the running loop)."""
        self._task = asyncio.get_running_loop().create_task(self._run(), name="rolltap-writer")

    def stats(self) -> WriterStats:
        since, full, now = self._down_since, self._full_at, time.monotonic()
        return WriterStats(
            self._queue.qsize(), self._transactions, self._writes, max(self._conn.connects - 1, 0),
            self._pending.commits, self._pending.bytes,
            None if since is None else now - since, None if full is None else now - full,
        )  # fmt: skip

    @property
    def pending_max_bytes(self) -> int:
        return self._pending.max_bytes

    async def wait_for_room(self) -> None:
        """Return once pending writes hold less than ``pending_max_bytes``.

        Raises StoreUnavailableError while the database is given up on.
        """
        while self._gave_up is None and self._pending.over:
            await self._pending.wait_for_room()
        if self._gave_up is not None:
            raise StoreUnavailableError(self._gave_up.message) from self._gave_up

    def check_available(self) -> None:
        """StoreUnavailableError while the database is given up on (else nothing)."""
        if self._gave_up is not None:
            raise StoreUnavailableError(self._gave_up.message) from self._gave_up

    async def wait_available(self) -> None:
        """Return once the writer accepts writes (at once unless it gave up on the database)."""
        await self._available.wait()

    async def submit(self, op: WriteOp) -> asyncio.Future[Any]:
        """Queue ``op``; StoreBusyError if a non-commit write finds no place in time."""
        if self._failure is not None:
            raise StoreClosedError("the store writer stopped") from self._failure
        if self._closing:
            raise StoreClosedError("the store is closed")
        if self._gave_up is not None:
            raise StoreUnavailableError(self._gave_up.message) from self._gave_up
        await self._pending.admit(op)
        self._queue.put_nowait(op)
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
        self._close_requested.set()
        try:
            if not task.done():
                await self._queue.put(None)
            await asyncio.wait({task})
        finally:
            task.cancel()
            await asyncio.wait({task})
            await self._conn.discard()
        if not task.cancelled() and task.exception() is not None:
            raise StoreClosedError("the store writer had stopped") from task.exception()

    async def _run(self) -> None:
        try:
            while True:
                if self._gave_up is not None:
                    if not await self._conn.probe(self._close_requested):
                        break
                    log.warning("store writer: database back after %.1fs", self._down_for())
                    self._gave_up, self._down_since = None, None
                    self._available.set()
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
        self._pending.taken(first)
        batch = [first]
        while len(batch) < self._max_batch:
            try:
                op = self._queue.get_nowait()
            except asyncio.QueueEmpty:
                break
            if op is None:
                return batch, True
            self._pending.taken(op)
            batch.append(op)
        return batch, False

    def _fail_queued(self, error: StoreError | None = None) -> None:
        while not self._queue.empty():
            op = self._queue.get_nowait()
            if op is not None:
                self._pending.taken(op)
                self._settle_failed([op], error or StoreClosedError("the store writer stopped"))

    async def _run_group(self, ops: list[WriteOp]) -> None:
        """Apply ``ops`` in one transaction, retrying through reconnects; settle each op."""
        delay, verify, pending = 0.02, False, ops
        while True:
            try:
                conn = await self._conn.get()
                if verify:
                    pending = await self._unapplied(conn, pending)
                if pending:
                    await self._transaction(conn, pending)
            except database_errors(StoreError) as exc:
                if not _transient(exc):
                    await self._permanent_failure(pending, exc)
                    return
                await self._conn.discard()
                if self._down_since is None:
                    self._down_since = time.monotonic()
                    log.warning("store writer: %s; reconnecting", type(exc).__name__)
                left = self._down_since + self._reconnect_timeout - time.monotonic()
                if left <= 0:
                    self._give_up(pending, exc)
                    return
                await asyncio.sleep(min(delay, left))
                delay, verify = min(delay * 2, 2.0), True
            else:
                if self._down_since is not None:
                    log.warning("store writer: reconnected after %.1fs", self._down_for())
                self._down_since = None
                self._settle_ok(pending)
                return

    def _down_for(self) -> float:
        return 0.0 if self._down_since is None else time.monotonic() - self._down_since

    def _give_up(self, ops: list[WriteOp], exc: BaseException) -> None:
        """The database stayed away too long: fail what is pending, refuse new writes."""
        error = StoreUnavailableError(
            f"{self._where} unreachable for {round(self._down_for(), 1):g} s ({type(exc).__name__})"
        )
        log.warning("store writer: %s; failing its pending writes", error.message)
        self._gave_up = error
        self._available.clear()
        self._settle_failed(ops, error, cause=exc)
        self._fail_queued(error)
        self._pending.wake()

    async def _transaction(self, conn: AsyncConnection, ops: Sequence[WriteOp]) -> None:
        now = time.time()
        async with conn.begin():
            # consecutive ops of one batch go together: one batched statement per table
            for batch, group in itertools.groupby(ops, key=lambda op: op.batched_by()):
                if batch is not None:
                    await batch(conn, list(group), now)
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

    async def _permanent_failure(self, ops: list[WriteOp], exc: BaseException) -> None:
        if len(ops) > 1:  # find the culprit: the others must not fail with it
            for op in list(ops):
                await self._run_group([op])
            return
        error = exc if isinstance(exc, StoreError) else translate_db_error(exc, where=self._where)
        if isinstance(error, StoreFullError):
            self._full_at = time.monotonic()  # an owner stops taking new work (stats)
        self._settle_failed(ops, error, cause=exc)

    def _settle_ok(self, ops: Sequence[WriteOp]) -> None:
        for op in ops:
            self._writes += 1
            self._pending.release(op)
            op.on_success()
            if not op.future.done():
                op.future.set_result(op.outcome())

    def _settle_failed(
        self, ops: Sequence[WriteOp], error: StoreError, cause: BaseException | None = None
    ) -> None:
        if cause is not None and error is not cause:
            error.__cause__ = cause
        for op in ops:
            self._pending.release(op)
            if not op.future.done():
                op.on_failure(error)
                op.future.set_exception(error)
