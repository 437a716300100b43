"""The read side of :class:`~rolltap.store.Store`: runs, sessions, events, export.

Reads use pooled connections, never the writer's, and see what is committed.
"""

from __future__ import annotations

import asyncio
from typing import Any

from sqlalchemy.ext.asyncio import AsyncEngine

from rolltap.errors import StoreError
from rolltap.events import Event, EventLog
from rolltap.results.rollout import RolloutResult
from rolltap.store import reader
from rolltap.store.aggregate import summary_of_run
from rolltap.store.attempt_read import session_results
from rolltap.store.ids import resolve_id
from rolltap.store.models import RunInfo, SessionInfo
from rolltap.store.schema import runs, sessions

__all__ = ["StoreReads"]


class StoreReads:
    """Reads over ``self._engine`` (set by :class:`~rolltap.store.Store`)."""

    _engine: AsyncEngine

    async def ping(self, timeout_s: float = 2.0) -> bool:
        """Whether the database answers a trivial query within ``timeout_s`` (a read: it
        says the server is up, not that the writer has caught up).

        >>> # if not await store.ping(): ...  # refuse new work
        """
        try:
            async with asyncio.timeout(timeout_s), reader.reading(self._engine) as conn:
                await conn.exec_driver_sql("SELECT 1")
        except (StoreError, TimeoutError):
            return False
        return True

    async def events(self, session_id: str) -> list[Event]:
        """The session's history in order, a fork's inherited prefix first.

        >>> # [e.kind for e in await store.events(session.id)]
        """
        async with reader.reading(self._engine) as conn:
            return await reader.read_events(conn, session_id)

    async def load_log(self, session_id: str) -> EventLog:
        """The session's whole history (forks resolved) as a log, ready to append to.

        >>> # log = await store.load_log(fork.id); log.append("note", {"text": "hi"})
        """
        return EventLog.from_events(await self.events(session_id))

    async def get_session(self, session_id: str) -> SessionInfo:
        """One session; StoreNotFoundError if there is none.

        >>> # (await store.get_session(session.id)).status
        """
        async with reader.reading(self._engine) as conn:
            return await reader.fetch_session(conn, session_id)

    async def list_sessions(
        self, run: str | None = None, status: str | None = None, *, limit: int | None = None
    ) -> list[SessionInfo]:
        """Sessions (of ``run``, with ``status``) in creation order.

        >>> # failed = await store.list_sessions(run.id, "failed")
        """
        async with reader.reading(self._engine) as conn:
            return await reader.list_sessions(conn, run=run, status=status, limit=limit)

    async def get_run(self, run_id: str) -> RunInfo:
        """One run with its counts; StoreNotFoundError if there is none.

        >>> # (await store.get_run(run.id)).mean_reward
        """
        async with reader.reading(self._engine) as conn:
            return await reader.fetch_run(conn, run_id)

    async def list_runs(self) -> list[RunInfo]:
        """Every run, oldest first.

        >>> # [r.name for r in await store.list_runs()]
        """
        async with reader.reading(self._engine) as conn:
            return await reader.list_runs(conn)

    async def run_summary(self, run_id: str) -> dict[str, Any]:
        """The run's summary: the one its owner stored after the final commit (``rolltap
        eval`` does), else computed in SQL from its sessions' columns (per-call latency
        percentiles and model call counts are then None). ``stored`` says which.

        >>> # (await store.run_summary(run.id))["reward"]["mean"]
        """
        async with reader.reading(self._engine) as conn:
            return await summary_of_run(conn, run_id)

    async def run_results(self, run_id: str) -> list[RolloutResult]:
        """Every session of ``run_id`` as a result read from its row (status, reward, error
        code, tokens, duration, attempt; no per-call figures), oldest first: what a retry
        plans from and counts beside its new attempts.

        >>> # failed = [r for r in await store.run_results(run.id) if r.error_code]
        """
        async with reader.reading(self._engine) as conn:
            return await session_results(conn, run_id)

    async def resolve_run_id(self, prefix: str) -> str:
        """The run whose id is ``prefix`` or, for 4 or more characters, starts with it.

        StoreNotFoundError if none; :class:`~rolltap.errors.AmbiguousIdError` (with
        up to 10 ``candidates``) if several runs start with it and none is it exactly.

        >>> # run = await store.get_run(await store.resolve_run_id("7ba5b25"))
        """
        async with reader.reading(self._engine) as conn:
            return await resolve_id(conn, runs, prefix, "run")

    async def resolve_session_id(self, prefix: str) -> str:
        """The session whose id is ``prefix`` or starts with it (as :meth:`resolve_run_id`).

        >>> # events = await store.events(await store.resolve_session_id("ro_3f2a"))
        """
        async with reader.reading(self._engine) as conn:
            return await resolve_id(conn, sessions, prefix, "session")
