"""The writer's one connection: opened lazily, discarded when broken, probed after an outage."""

from __future__ import annotations

import asyncio
import contextlib
import logging

from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from rolltap.store.dberrors import database_errors

__all__ = ["WriterConnection"]

log = logging.getLogger("rolltap.store.writer")


class WriterConnection:
    """Holds the serial writer's connection and counts how often it (re)connected."""

    def __init__(self, engine: AsyncEngine) -> None:
        self._engine = engine
        self._conn: AsyncConnection | None = None
        self.connects = 0

    async def get(self) -> AsyncConnection:
        """The live connection, opened if there is none."""
        if self._conn is None or self._conn.invalidated or self._conn.closed:
            self._conn = await self._engine.connect()
            self.connects += 1
            if self._engine.dialect.name == "postgresql":
                await self._conn.exec_driver_sql("SET application_name = 'rolltap-writer'")
                await self._conn.commit()
        return self._conn

    async def discard(self) -> None:
        """Drop the connection (it is broken, or the writer stops)."""
        conn, self._conn = self._conn, None
        if conn is None:
            return
        try:
            await conn.invalidate()
            await conn.close()
        except database_errors() as exc:
            log.debug("store writer: closing a broken connection: %s", type(exc).__name__)

    async def probe(self, stop: asyncio.Event) -> bool:
        """Connect with backoff until the database answers (True) or ``stop`` is set."""
        delay = 0.05
        while not stop.is_set():
            try:
                conn = await self.get()
                await conn.exec_driver_sql("SELECT 1")
                await conn.rollback()
            except database_errors():
                await self.discard()
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(delay):
                        await stop.wait()
                delay = min(delay * 2, 2.0)
            else:
                return True
        return False
