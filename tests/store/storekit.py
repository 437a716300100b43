"""Helpers the store tests share: statement counting, raw row reads, server-side kills."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Awaitable, Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import event, func, select, text
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import create_async_engine

from rolltap.events import Event, EventLog
from rolltap.store import InjectedFault, Store, WriterHooks
from rolltap.store.ops import WriteOp
from rolltap.store.schema import events, run_stats, task_stats

#: admin connections (to an existing database) of the servers the tests create databases on
ADMIN_URLS = {
    "postgresql": os.environ.get(
        "ROLLTAP_TEST_POSTGRES", "postgresql+asyncpg://postgres@127.0.0.1:5432/test"
    ),
    "mariadb": os.environ.get("ROLLTAP_TEST_MARIADB", "mysql+asyncmy://root@127.0.0.1:3306/test"),
}


class ScriptedHooks(WriterHooks):
    """Writer hooks a test programs: each queued action runs once, in order."""

    def __init__(self) -> None:
        self.before: list[Callable[[], Awaitable[None]]] = []
        self.after: list[Callable[[], Awaitable[None]]] = []

    async def before_commit(self, ops: Sequence[WriteOp]) -> None:
        if self.before:
            await self.before.pop(0)()

    async def after_commit(self, ops: Sequence[WriteOp]) -> None:
        if self.after:
            await self.after.pop(0)()


class Gate:
    """Holds the writer inside a transaction until the test opens it."""

    def __init__(self) -> None:
        self.entered, self.opened = asyncio.Event(), asyncio.Event()

    async def __call__(self) -> None:
        self.entered.set()
        await self.opened.wait()


def fault(*, transient: bool) -> Callable[[], Awaitable[None]]:
    """A hook action raising an injected fault (transient: acts like a lost connection)."""

    async def action() -> None:
        raise InjectedFault("injected", transient=transient)

    return action


@dataclass
class Statements:
    """Statements the store's engine sent, via SQLAlchemy's ``before_cursor_execute``."""

    seen: list[tuple[str, Any, bool]] = field(default_factory=list)

    def on_execute(
        self, conn: Any, cursor: Any, statement: str, params: Any, context: Any, many: bool
    ) -> None:
        self.seen.append((statement, params, many))

    def matching(self, prefix: str) -> list[tuple[str, Any, bool]]:
        return [s for s in self.seen if s[0].lstrip().upper().startswith(prefix)]


@contextmanager
def count_statements(store: Store) -> Iterator[Statements]:
    found = Statements()
    engine = store.engine.sync_engine
    event.listen(engine, "before_cursor_execute", found.on_execute)
    try:
        yield found
    finally:
        event.remove(engine, "before_cursor_execute", found.on_execute)


def make_log(n: int, *, tag: str = "e") -> EventLog:
    log = EventLog()
    extend(log, n, tag=tag)
    return log


def extend(log: EventLog, n: int, *, tag: str = "e") -> None:
    for _ in range(n):
        log.append("note", {"text": f"{tag}{len(log)}", "n": len(log)})


def as_tuples(items: Any) -> list[tuple[int, str, float, dict[str, Any]]]:
    return [(e.seq, e.kind, e.ts, dict(e.payload)) for e in items]


async def assert_stored(store: Store, session_id: str, expected: list[Event]) -> None:
    """The database holds exactly ``expected`` for the session, and counts it."""
    assert as_tuples(await store.events(session_id)) == as_tuples(expected)
    assert (await store.get_session(session_id)).n_events == len(expected)


async def own_rows(store: Store, session_id: str) -> list[int]:
    """Seqs of the rows stored under ``session_id`` itself (no fork resolution)."""
    query = select(events.c.seq).where(events.c.session_id == session_id).order_by(events.c.seq)
    async with store.engine.connect() as conn:
        return list(await conn.scalars(query))


async def count_rows(store: Store, table: Any) -> int:
    async with store.engine.connect() as conn:
        return int(await conn.scalar(select(func.count()).select_from(table)) or 0)


async def kill_store_connections(store_url: str) -> int:
    """Kill the store's writer connection server-side; how many connections were killed.

    PostgreSQL: ``pg_terminate_backend`` of the backend named ``rolltap-writer`` in the
    test database. MariaDB has no connection names: ``KILL`` every connection to the
    test database (the writer's among them), found in the processlist.
    """
    database = make_url(store_url).database
    backend = "postgresql" if store_url.startswith("postgresql") else "mariadb"
    engine = create_async_engine(ADMIN_URLS[backend], isolation_level="AUTOCOMMIT")
    try:
        async with engine.connect() as conn:
            if backend == "postgresql":
                query = text(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                    "WHERE datname = :db AND application_name = 'rolltap-writer'"
                )
                return len((await conn.execute(query, {"db": database})).all())
            query = text(
                "SELECT id FROM information_schema.processlist "
                "WHERE db = :db AND id <> CONNECTION_ID()"
            )
            ids = list(await conn.scalars(query, {"db": database}))
            for conn_id in ids:
                await conn.exec_driver_sql(f"KILL {int(conn_id)}")
            return len(ids)
    finally:
        await engine.dispose()


async def wait_until(predicate: Any, *, steps: int = 100_000) -> None:
    """Yield to the loop until ``predicate()`` holds (state, not time, decides)."""
    for _ in range(steps):
        if predicate():
            return
        await asyncio.sleep(0)
    raise AssertionError("condition never held")


async def aggregates(store: Store, run_id: str) -> tuple[list[Any], list[Any]]:
    """A run's aggregate rows that count something, totals rounded (float sums)."""
    async with store.engine.connect() as conn:
        stats = [
            (r.stat, r.key, r.n, round(r.total, 9), r.message)
            for r in await conn.execute(select(run_stats).where(run_stats.c.run_id == run_id))
            if r.n or round(r.total, 9)
        ]
        tasks = [
            (r.task_key, r.rollouts, r.rewarded, r.passed, round(r.reward_sum, 9))
            for r in await conn.execute(select(task_stats).where(task_stats.c.run_id == run_id))
            if r.rollouts
        ]
    return sorted(stats), sorted(tasks)
