"""The :class:`Store`: SQL persistence of runs, sessions and their event logs.

>>> async def demo(url: str) -> None:
...     async with await Store.open(url) as store:
...         run = await store.create_run("demo")
...         session = await store.create_session(run.id)
...         log = EventLog()
...         log.append(EventKind.STATUS, {"status": "running"})
...         await store.commit(session.id, log)  # writes event 0
...         log.append(EventKind.REWARD, {"reward": 1.0})
...         await store.commit(session.id, log, status="completed", reward=1.0)  # event 1 only
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Mapping, Sequence
from types import TracebackType
from typing import Any

from sqlalchemy.ext.asyncio import AsyncEngine

from rolltap.events import Event, EventLog
from rolltap.store import reader
from rolltap.store.admin_ops import CreateRunOp, CreateSessionOp, DeleteRunOp, DeleteSessionOp
from rolltap.store.engine import create_engine
from rolltap.store.errors import StoreConflictError, StoreNotFoundError
from rolltap.store.eval_sets import StoreEvalSets
from rolltap.store.leasing import StoreLeases
from rolltap.store.migrate import ensure_schema
from rolltap.store.models import (
    CommitResult,
    RunInfo,
    SessionInfo,
    check_attempt,
    check_id,
    check_placement,
    check_status,
)
from rolltap.store.opening import check_sqlite_file
from rolltap.store.ops import CommitOp, SessionState, WriteOp
from rolltap.store.reads import StoreReads
from rolltap.store.schema import runs, sessions
from rolltap.store.scorings import StoreScorings
from rolltap.store.serialize import event_rows
from rolltap.store.summary_ops import RecordRetryOp, WriteRunSummaryOp
from rolltap.store.url import (
    backend_of,
    mask_url,
    resolve_store_url,
    sqlite_path,
    to_sqlalchemy_url,
)
from rolltap.store.writer import Writer, WriterHooks, WriterStats

__all__ = ["Store"]


class Store(StoreReads, StoreLeases, StoreScorings, StoreEvalSets):
    """Runs, sessions and event logs in SQLite, PostgreSQL or MySQL/MariaDB.

    Open with ``async with await Store.open(url) as store:``. Every write goes through
    one serial writer (one task, one connection); reads use pooled connections.
    :meth:`commit` is incremental: only events past the persisted prefix are
    serialized and written. One store should own a session's writes at a time.
    """

    def __init__(self, engine: AsyncEngine, writer: Writer) -> None:
        self._engine, self._writer = engine, writer
        self._states: dict[str, SessionState] = {}
        self._epochs: dict[str, int] = {}
        self._closed = False

    @classmethod
    async def open(
        cls,
        url: str | None = None,
        *,
        create: bool = True,
        upgrade: bool | None = None,
        hooks: WriterHooks | None = None,
        **writer_options: Any,
    ) -> Store:
        """Open the store at ``url`` (default: ``ROLLTAP_STORE``, else ``sqlite:///rolltap.db``).

        A SQLite file is created (unless ``create=False``) and migrated automatically;
        a server database must be at the current schema (``rolltap db upgrade``) unless
        ``upgrade=True``. ``writer_options`` (:class:`~rolltap.store.writer.Writer`):
        ``queue_size``, ``busy_timeout``, ``max_batch``, ``reconnect_timeout`` (300 s),
        ``pending_max_bytes`` (``ROLLTAP_STORE_PENDING_MAX_BYTES``, else 256 MiB).

        >>> # async with await Store.open("postgresql://db/rolltap") as store: ...
        """
        sa_url = to_sqlalchemy_url(resolve_store_url(url))
        sqlite = backend_of(sa_url) == "sqlite"
        path = sqlite_path(sa_url)
        if sqlite and path is not None and not create and not path.exists():
            raise StoreNotFoundError(f"no store at {path}")
        if sqlite and path is not None:
            await check_sqlite_file(path)
        engine = create_engine(sa_url)
        try:
            await ensure_schema(engine, auto_upgrade=sqlite if upgrade is None else upgrade)
        except BaseException:
            await engine.dispose()
            raise
        store = cls(engine, Writer(engine, hooks=hooks, **writer_options))
        store._writer.start()
        return store

    async def __aenter__(self) -> Store:
        return self

    async def __aexit__(
        self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Write what is queued, stop the writer, release connections. Idempotent.

        Bound the flush with ``asyncio.timeout``: the writer task is cancelled and awaited.

        >>> # await store.aclose()  # what `async with` does on exit
        """
        if self._closed:
            return
        self._closed = True
        try:
            await self._writer.close()
        finally:
            await self._engine.dispose()

    @property
    def engine(self) -> AsyncEngine:
        """The SQLAlchemy engine (e.g. to count statements with its events)."""
        return self._engine

    @property
    def url(self) -> str:
        """The store URL, password masked."""
        return mask_url(self._engine.url)

    @property
    def backend(self) -> str:
        """``sqlite``, ``postgresql`` or ``mysql``."""
        return backend_of(self._engine.url)

    def stats(self) -> WriterStats:
        """Queue depth, transactions, writes, reconnects and health of the serial writer.

        >>> # store.stats().reconnects; store.stats().describe()  # "store unavailable ..."
        """
        return self._writer.stats()

    @property
    def pending_max_bytes(self) -> int:
        """The bound on bytes of writes held while the database is away."""
        return self._writer.pending_max_bytes

    async def wait_for_room(self) -> None:
        """Backpressure before admitting new work: wait while pending writes hold
        ``pending_max_bytes`` or more; StoreUnavailableError while given up on."""
        await self._writer.wait_for_room()

    async def wait_available(self) -> None:
        """Wait until writes are accepted again after the database was given up on."""
        await self._writer.wait_available()

    async def _write(self, op: WriteOp) -> Any:
        return await asyncio.shield(await self._writer.submit(op))

    async def create_run(
        self, name: str | None = None, config: Mapping[str, Any] | None = None, *,
        run_id: str | None = None, created_at: float | None = None, set_id: str | None = None,
    ) -> RunInfo:  # fmt: skip
        """Create a run: ``run = await store.create_run("gsm8k-eval", {"model": "m"})``
        (``set_id``: one of an eval set's runs)."""
        run = RunInfo(
            id=check_id(run_id or uuid.uuid4().hex, "run"), name=name, config=dict(config or {}),
            created_at=time.time() if created_at is None else created_at,
            n_sessions=0, n_finished=0, n_failed=0, n_rewarded=0, reward_sum=0.0, set_id=set_id,
        )  # fmt: skip
        result: RunInfo = await self._write(CreateRunOp(run))
        return result

    async def write_run_summary(self, run_id: str, summary: Mapping[str, Any]) -> None:
        """Store ``summary`` (JSON-ready) as the run's, after its final commit.

        :meth:`run_summary` returns it (with histograms the store adds) until a later
        commit changes the run's counters.
        """
        await self._write(WriteRunSummaryOp(run_id, summary))

    async def record_retry(
        self, run_id: str, *, policy: str, codes: list[str] | None, slots: int
    ) -> None:
        """Note in the run's config that a retry pass of ``slots`` rollouts begins, with the
        attempt ``policy`` and error ``codes`` it was given (later reads of the run's
        summary pick one attempt per slot by that policy); its stored summary is cleared."""
        await self._write(RecordRetryOp(run_id, policy=policy, codes=codes, slots=slots))

    async def create_session(
        self, run_id: str, *, session_id: str | None = None, user: str | None = None,
        task: Mapping[str, Any] | None = None, parent: str | None = None,
        fork_at: int | None = None, node_id: str | None = None, worker_id: str | None = None,
        attempt: int = 0, retry_of: str | None = None,
    ) -> SessionInfo:  # fmt: skip
        """Create a session in ``run_id``; a fork of ``parent`` at ``fork_at`` when given.

        A fork starts from the parent's first ``fork_at`` events (default: all of them)
        without copying them; get its log with :meth:`load_log`, append, commit.
        ``node_id`` (≤ 128 characters) and ``worker_id`` (≤ 64) record where it runs;
        ``attempt`` (> 0) and ``retry_of`` make it a new attempt of the session it repeats.

        >>> # s = await store.create_session(run.id, parent=base.id, fork_at=12)
        """
        now = time.time()
        node_id, worker_id = check_placement(node_id, worker_id)
        attempt, retry_of = check_attempt(attempt, retry_of)
        session = SessionInfo(
            id=check_id(session_id or uuid.uuid4().hex, "session"), run_id=run_id, user=user,
            task=dict(task or {}), status="pending", created_at=now, updated_at=now,
            n_events=0, reward=None, parent_id=parent, fork_at=fork_at,
            node_id=node_id, worker_id=worker_id, attempt=attempt, retry_of=retry_of,
        )  # fmt: skip
        op = CreateSessionOp(session, on_success=self._remember, epoch=self._epochs.get(run_id))
        result: SessionInfo = await self._write(op)
        return result

    def _remember(self, info: SessionInfo) -> None:
        state = self._states.setdefault(info.id, SessionState("", 0, 0, None, "pending", None))
        state.run_id, state.prefix, state.parent_id = info.run_id, info.n_events, info.parent_id
        state.base = (info.fork_at or 0) if info.parent_id is not None else 0
        state.status, state.reward, state.loaded = info.status, info.reward, True
        state.metrics = None  # counted afresh from the log of its next commit

    async def commit(
        self,
        session_id: str,
        log: EventLog,
        *,
        status: str | None = None,
        reward: float | None = None,
    ) -> CommitResult:
        """Persist ``log``: only events past the persisted prefix, durable on return.

        A history cut below the prefix is replaced whole in one transaction. Nothing
        new (and the same status and reward) issues no statement at all.

        >>> # await store.commit(session.id, log, status="completed", reward=1.0)
        """
        if status is not None:
            check_status(status)
        # given up on: say so before a read of the prefix fails as a plain database error
        self._writer.check_available()
        state = self._states.get(session_id)
        if state is None:
            state = SessionState("", 0, 0, None, "pending", None, loaded=False)
            self._states[session_id] = state
        async with state.lock:
            if state.inflight is not None and not state.inflight.done():
                await asyncio.wait([state.inflight])
            if state.conflicted:
                raise StoreConflictError(
                    f"session {session_id}: another writer changed it since this one last "
                    "wrote (e.g. its rollout was ended worker_lost); this writer's commits "
                    "to it are refused"
                )
            if not state.loaded:
                await self._load(session_id)
            epoch = self._epochs.get(state.run_id)
            op = CommitOp(session_id, state, log, status=status, reward=reward, epoch=epoch)
            if op.noop:
                return CommitResult(session_id, len(log), 0, replaced=False, noop=True)
            future = await self._writer.submit(op)
            state.inflight = future
            result: CommitResult = await asyncio.shield(future)
            return result

    async def _load(self, session_id: str) -> None:
        try:
            async with reader.reading(self._engine) as conn:
                info = await reader.fetch_session(conn, session_id, stored=True)
        except StoreNotFoundError:
            self._states.pop(session_id, None)
            raise
        self._remember(info)

    def forget(self, session_id: str) -> None:
        """Drop what the store remembers about a session it will not write again.

        The next commit of that session (if any) reloads its persisted prefix.
        """
        state = self._states.get(session_id)
        if state is not None and not state.lock.locked():
            del self._states[session_id]

    async def delete_session(self, session_id: str, *, cascade: bool = False) -> list[str]:
        """Delete a session and its events; refused while forks depend on it unless ``cascade``.

        Returns the ids deleted (the session, then its forks).

        >>> # await store.delete_session(base.id, cascade=True)
        """
        op = DeleteSessionOp(session_id, cascade=cascade, forget=self._forget_ids)
        result: list[str] = await self._write(op)
        return result

    async def delete_run(self, run_id: str, *, cascade: bool = False) -> int:
        """Delete a run, its sessions and their events; the number of sessions deleted.

        Refused while sessions of other runs fork from it, unless ``cascade``.

        >>> # await store.delete_run(run.id)
        """
        op = DeleteRunOp(run_id, cascade=cascade, forget=self._forget_run)
        result: int = await self._write(op)
        return result

    def _forget_ids(self, ids: list[str]) -> None:
        for session_id in ids:
            self._states.pop(session_id, None)

    def _forget_run(self, run_id: str, elsewhere: list[str]) -> None:
        gone = [sid for sid, state in self._states.items() if state.run_id == run_id]
        self._forget_ids(gone + elsewhere)

    async def import_session(
        self,
        run: RunInfo,
        session: SessionInfo,
        events: Sequence[Event],
        *,
        existing_ok: bool = False,
    ) -> bool:
        """Store a session read from an export, as it was (its run created if missing,
        with its exported id, name and config); whether it was written.

        A session already stored is a StoreConflictError, or with ``existing_ok`` left
        as it is (False returned). ``rolltap sessions import`` reads the file
        (:func:`rolltap.exports.import_jsonl`).
        """
        async with reader.reading(self._engine) as conn:
            has_run = await reader.exists(conn, runs, run.id)
            has_session = await reader.exists(conn, sessions, session.id)
        if not has_run:
            await self._write(CreateRunOp(run))
        if has_session and existing_ok:
            return False
        rows = event_rows(session.id, events)
        await self._write(CreateSessionOp(session, rows=rows, on_success=self._remember))
        return True
