"""Reads: runs, sessions and events (forks resolved), on pooled connections.

Reads never go through the writer; they see what is committed.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from sqlalchemy import RowMapping, Table, select
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from rolltap.store.dberrors import translate_db_error
from rolltap.store.errors import StoreNotFoundError
from rolltap.store.events import Event
from rolltap.store.models import RunInfo, SessionInfo
from rolltap.store.schema import events, runs, sessions
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
]

#: (seq, kind, ts, payload bytes)
EventRow = tuple[int, str, float, bytes]


@asynccontextmanager
async def reading(engine: AsyncEngine) -> AsyncIterator[AsyncConnection]:
    """A pooled connection; database errors inside become StoreErrors."""
    try:
        async with engine.connect() as conn:
            yield conn
    except (SQLAlchemyError, OSError) as exc:
        raise translate_db_error(exc) from exc


def run_info(m: RowMapping) -> RunInfo:
    return RunInfo(
        id=m["id"],
        name=m["name"],
        config=load_doc(m["config"]),
        created_at=m["created_at"],
        n_sessions=m["n_sessions"],
        n_finished=m["n_finished"],
        n_failed=m["n_failed"],
        n_rewarded=m["n_rewarded"],
        reward_sum=m["reward_sum"],
    )


def session_info(m: RowMapping) -> SessionInfo:
    return SessionInfo(
        id=m["id"],
        run_id=m["run_id"],
        user=m["user_name"],
        task=load_doc(m["task"]),
        status=m["status"],
        created_at=m["created_at"],
        updated_at=m["updated_at"],
        n_events=m["n_events"],
        reward=m["reward"],
        parent_id=m["parent_id"],
        fork_at=m["fork_at"],
    )


async def exists(conn: AsyncConnection, table: Table, key: str) -> bool:
    """Whether ``table`` (runs or sessions) has a row with id ``key``."""
    return (await conn.scalar(select(table.c.id).where(table.c.id == key))) is not None


async def fetch_run(conn: AsyncConnection, run_id: str) -> RunInfo:
    row = (await conn.execute(select(runs).where(runs.c.id == run_id))).mappings().first()
    if row is None:
        raise StoreNotFoundError(f"no run {run_id!r}")
    return run_info(row)


async def fetch_session(conn: AsyncConnection, session_id: str) -> SessionInfo:
    query = select(sessions).where(sessions.c.id == session_id)
    row = (await conn.execute(query)).mappings().first()
    if row is None:
        raise StoreNotFoundError(f"no session {session_id!r}")
    return session_info(row)


async def list_runs(conn: AsyncConnection) -> list[RunInfo]:
    rows = await conn.execute(select(runs).order_by(runs.c.created_at, runs.c.id))
    return [run_info(row) for row in rows.mappings()]


async def list_sessions(
    conn: AsyncConnection,
    *,
    run: str | None = None,
    status: str | None = None,
    after: str | None = None,
    limit: int | None = None,
) -> list[SessionInfo]:
    """Sessions by creation time (or by id when paging with ``after``)."""
    query = select(sessions)
    if run is not None:
        query = query.where(sessions.c.run_id == run)
    if status is not None:
        query = query.where(sessions.c.status == status)
    if after is not None:
        query = query.where(sessions.c.id > after).order_by(sessions.c.id)
    else:
        query = query.order_by(sessions.c.created_at, sessions.c.id)
    if limit is not None:
        query = query.limit(limit)
    return [session_info(row) for row in (await conn.execute(query)).mappings()]


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
