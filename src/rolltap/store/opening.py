"""Opening a store: what can go wrong before the first statement, in one clear error.

A database that does not exist is a :class:`StoreNotFoundError` naming it; any other
failure to connect a :class:`~rolltap.errors.StoreError` with the driver's first line.
asyncpg's connect errors reach us unwrapped by SQLAlchemy, so they are caught by the
driver's own base class (looked up only when the URL uses asyncpg).
"""

from __future__ import annotations

import asyncio
import importlib
import sqlite3
from pathlib import Path

from sqlalchemy.engine import URL
from sqlalchemy.exc import DBAPIError, SQLAlchemyError

from rolltap.errors import StoreError
from rolltap.store.dberrors import translate_db_error
from rolltap.store.errors import StoreNotFoundError
from rolltap.store.url import mask_url

__all__ = ["check_sqlite_file", "open_errors", "translate_open_error"]

#: PostgreSQL's SQLSTATE for "database does not exist" (invalid_catalog_name)
_PG_NO_DATABASE = "3D000"
#: MySQL/MariaDB's error number for "Unknown database"
_MYSQL_NO_DATABASE = 1049


def open_errors(url: URL) -> tuple[type[BaseException], ...]:
    """What opening ``url`` may raise: SQLAlchemy's errors, OSError, and the driver
    exceptions that SQLAlchemy lets through unwrapped on connect."""
    if url.get_driver_name() != "asyncpg":
        return (SQLAlchemyError, OSError)
    # the engine was created, so asyncpg is imported already; it ships no type stubs
    postgres_error: type[BaseException] = importlib.import_module("asyncpg").PostgresError
    return (SQLAlchemyError, OSError, postgres_error)


def _missing_database(orig: BaseException) -> bool:
    if getattr(orig, "sqlstate", None) == _PG_NO_DATABASE:
        return True
    return bool(orig.args) and orig.args[0] == _MYSQL_NO_DATABASE


def translate_open_error(exc: BaseException, url: URL) -> StoreError:
    """The StoreError for a failure to open the store at ``url``."""
    orig = exc.orig if isinstance(exc, DBAPIError) and exc.orig is not None else exc
    if _missing_database(orig):
        server = f"{url.host or 'localhost'}:{url.port}" if url.port else url.host or "localhost"
        return StoreNotFoundError(
            f"database {url.database!r} does not exist on {server}: create it, or fix "
            f"--store / ROLLTAP_STORE ({mask_url(url)})"
        )
    if isinstance(exc, SQLAlchemyError | OSError):
        return translate_db_error(exc)
    detail = str(orig).splitlines()[0] if str(orig) else ""
    return StoreError(f"cannot open {mask_url(url)} ({type(orig).__name__}): {detail}")


async def check_sqlite_file(path: Path) -> None:
    """Open (and so create) the SQLite file once with the plain driver, off the loop.

    A file that cannot be opened fails here, before aiosqlite starts its worker
    thread: after a failed connect that thread is stopped without being waited for,
    and its last callback then races the event loop's close ("Event loop is closed"
    printed after the error).
    """
    try:
        await asyncio.to_thread(lambda: sqlite3.connect(path, timeout=30).close())
    except sqlite3.Error as exc:
        if not path.parent.is_dir():
            raise StoreNotFoundError(
                f"cannot create the store {path}: folder {path.parent} does not exist"
            ) from exc
        raise StoreError(f"cannot open the store {path}: {exc}") from exc
