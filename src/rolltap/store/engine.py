"""Async engines for the three backends, with the settings each needs."""

from __future__ import annotations

from typing import Any

from sqlalchemy import event
from sqlalchemy.engine import URL
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from rolltap.errors import MissingExtraError
from rolltap.store.url import backend_of

__all__ = ["create_engine"]

#: the extra that ships each server backend's async driver
_DRIVER_EXTRAS = {"postgresql": ("postgres", "asyncpg"), "mysql": ("mysql", "asyncmy")}


def create_engine(url: URL) -> AsyncEngine:
    """An engine for a URL from :func:`~rolltap.store.url.to_sqlalchemy_url`.

    SQLite runs in WAL mode (readers never block the writer) with foreign keys on and
    full fsync on commit; the servers get pre-ping so pooled readers survive restarts.
    A driver that is not installed is a :class:`~rolltap.errors.MissingExtraError`.
    """
    try:
        return _create(url)
    except ImportError as exc:
        extra, driver = _DRIVER_EXTRAS.get(backend_of(url), ("", url.get_driver_name()))
        if extra and exc.name == driver:
            raise MissingExtraError.for_extra(extra, driver) from exc
        missing = exc.name or driver
        raise MissingExtraError(f"the database driver {missing} is not installed") from exc


def _create(url: URL) -> AsyncEngine:
    if backend_of(url) == "sqlite":
        engine = create_async_engine(url, connect_args={"timeout": 30})
        event.listen(engine.sync_engine, "connect", _sqlite_pragmas)
        return engine
    return create_async_engine(url, pool_pre_ping=True, pool_recycle=3600)


def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
    cursor = dbapi_connection.cursor()
    for pragma in ("journal_mode=WAL", "synchronous=FULL", "foreign_keys=ON"):
        cursor.execute(f"PRAGMA {pragma}")
    cursor.close()
