"""Reads: runs, sessions and events (forks resolved), on pooled connections.

Reads never go through the writer; they see what is committed.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from sqlalchemy import RowMapping, Select, Table, select
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from rolltap.events import Event
from rolltap.store.dberrors import database_errors, translate_db_error
from rolltap.store.errors import StoreNotFoundError
from rolltap.store.lease import effective_status, status_filter
from rolltap.store.models import RunInfo, SessionInfo
from rolltap.store.rollup_read import read_run_stats
from rolltap.store.schema import events, leases, runs, sessions
from rolltap.store.serialize import load_doc, row_event

__all__ = [
    "EventRow",
    "exists",
    "fetch_run",
    "fetch_session",
    "iter_event_rows",
    "list_runs",
    "list_sessions",
    "read_events",
    "reading",
    "run_info",
    "session_info",
    "with_lease",
]

#: (seq, kind, ts, payload bytes)
EventRow = tuple[int, str, float, bytes]


@asynccontextmanager
async def reading(engine: AsyncEngine) -> AsyncIterator[AsyncConnection]:
    """A pooled connection; database errors inside become StoreErrors."""
    try:
        async with engine.connect() as conn:
            yield conn
    except database_errors() as exc:
        raise translate_db_error(exc) from exc


def run_info(m: RowMapping, interrupted: tuple[int, int] = (0, 0)) -> RunInfo:
    """A run from its row; ``interrupted``: (its sessions read as interrupted but not yet
    stored so — counted as finished and failed here —, all its interrupted sessions)."""
    read_so, total = interrupted
    return RunInfo(
        id=m["id"],
        name=m["name"],
        config=load_doc(m["config"]),
        created_at=m["created_at"],
        n_sessions=m["n_sessions"],
        n_finished=m["n_finished"] + read_so,
        n_failed=m["n_failed"] + read_so,
        n_rewarded=m["n_rewarded"],
        reward_sum=m["reward_sum"],
        n_interrupted=total,
        set_id=m["set_id"],
    )


def session_info(m: RowMapping, now: float | None = None) -> SessionInfo:
    """A session from its row; with ``now`` and the run's lease expiry joined in (see
    :func:`with_lease`), an unfinished session of an expired lease reads as interrupted."""
    status = m["status"]
    if now is not None:
        status = effective_status(status, m["lease_expires_at"], now)
    return SessionInfo(
        id=m["id"],
        run_id=m["run_id"],
        user=m["user_name"],
        task=load_doc(m["task"]),
        status=status,
        created_at=m["created_at"],
        updated_at=m["updated_at"],
        n_events=m["n_events"],
        reward=m["reward"],
        parent_id=m["parent_id"],
        fork_at=m["fork_at"],
        node_id=m["node_id"],
        worker_id=m["worker_id"],
        attempt=m["attempt"] or 0,  # NULL: stored before 0006, or a first attempt
        retry_of=m["retry_of"],
    )


async def exists(conn: AsyncConnection, table: Table, key: str) -> bool:
    """Whether ``table`` (runs or sessions) has a row with id ``key``."""
    return (await conn.scalar(select(table.c.id).where(table.c.id == key))) is not None


def with_lease() -> Select[tuple[object, ...]]:
    """Sessions with their run's lease expiry (``lease_expires_at``, None without a lease)."""
    joined = sessions.outerjoin(leases, leases.c.run_id == sessions.c.run_id)
    return select(sessions, leases.c.expires_at.label("lease_expires_at")).select_from(joined)


async def _interrupted(
    conn: AsyncConnection, run_ids: list[str], now: float
) -> dict[str, tuple[int, int]]:
    """Per run: (unfinished sessions whose run's lease expired, those plus the sessions
    stored ``interrupted``), from the runs' aggregates."""
    stats = await read_run_stats(conn, run_ids, now)
    return {run_id: s.interrupted() for run_id, s in stats.items()}


async def fetch_run(conn: AsyncConnection, run_id: str) -> RunInfo:
    row = (await conn.execute(select(runs).where(runs.c.id == run_id))).mappings().first()
    if row is None:
        raise StoreNotFoundError(f"no run {run_id!r}")
    counts = await _interrupted(conn, [run_id], time.time())
    return run_info(row, counts.get(run_id, (0, 0)))


async def fetch_session(
    conn: AsyncConnection, session_id: str, *, stored: bool = False
) -> SessionInfo:
    """One session as readers see it; ``stored``: with the status its row holds (writers)."""
    query = with_lease().where(sessions.c.id == session_id)
    row = (await conn.execute(query)).mappings().first()
    if row is None:
        raise StoreNotFoundError(f"no session {session_id!r}")
    return session_info(row, None if stored else time.time())


async def list_runs(conn: AsyncConnection) -> list[RunInfo]:
    rows = (await conn.execute(select(runs).order_by(runs.c.created_at, runs.c.id))).mappings()
    found = list(rows)
    counts = await _interrupted(conn, [row["id"] for row in found], time.time()) if found else {}
    return [run_info(row, counts.get(row["id"], (0, 0))) for row in found]


async def list_sessions(
    conn: AsyncConnection,
    *,
    run: str | None = None,
    status: str | None = None,
    after: str | None = None,
    limit: int | None = None,
) -> list[SessionInfo]:
    """Sessions by creation time (or by id when paging with ``after``)."""
    now = time.time()
    query = with_lease()
    if run is not None:
        query = query.where(sessions.c.run_id == run)
    if status is not None:
        query = query.where(status_filter(status, now))
    if after is not None:
        query = query.where(sessions.c.id > after).order_by(sessions.c.id)
    else:
        query = query.order_by(sessions.c.created_at, sessions.c.id)
    if limit is not None:
        query = query.limit(limit)
    return [session_info(row, now) for row in (await conn.execute(query)).mappings()]


async def _segments(conn: AsyncConnection, session: SessionInfo) -> list[tuple[str, int, int]]:
    """(session id, first seq, end seq) of the stored rows making up a history, oldest first.

    A fork's own rows start at its fork point; below it, its parent's rows (themselves
    perhaps a fork's) up to the fork point.
    """
    segments: list[tuple[str, int, int]] = []
    current, end = session, session.n_events
    while True:
        base = current.fork_at if current.parent_id is not None and current.fork_at else 0
        if base < end:
            segments.append((current.id, base, end))
        if current.parent_id is None or base == 0:
            break
        end = min(end, base)
        current = await fetch_session(conn, current.parent_id)
    segments.reverse()
    return segments


async def iter_event_rows(
    conn: AsyncConnection, session: SessionInfo, *, chunk: int = 500
) -> AsyncIterator[EventRow]:
    """Stream a session's whole history in order, without holding it in memory."""
    cols = (events.c.seq, events.c.kind, events.c.ts, events.c.payload)
    for owner, start, end in await _segments(conn, session):
        query = (
            select(*cols)
            .where(events.c.session_id == owner, events.c.seq >= start, events.c.seq < end)
            .order_by(events.c.seq)
            .execution_options(yield_per=chunk)
        )
        async for seq, kind, ts, payload in await conn.stream(query):
            yield seq, kind, ts, payload


async def read_events(conn: AsyncConnection, session_id: str) -> list[Event]:
    session = await fetch_session(conn, session_id)
    return [row_event(*row) async for row in iter_event_rows(conn, session)]
