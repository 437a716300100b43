"""Database failures sorted for the writer: worth a retry, a full disk, or a StoreError.

A server that is stopped, restarting or unreachable shows up differently per driver
(asyncpg: SQLSTATE class 08 / 57P0x or a refused connect; asyncmy: MySQL client errors
2002-2013; SQLite: a busy or locked file); all of them are *transient*: the writer
reconnects with backoff. A full disk is not: retrying cannot help, so it becomes one
:class:`~rolltap.store.errors.StoreFullError` naming the database and the cause.
"""

from __future__ import annotations

import sqlite3
import sys

from sqlalchemy.exc import (
    DBAPIError,
    IntegrityError,
    InterfaceError,
    OperationalError,
    SQLAlchemyError,
)

from rolltap.errors import StoreError
from rolltap.store.errors import StoreConflictError, StoreFullError

__all__ = ["database_errors", "is_full", "is_transient", "translate_db_error"]

#: PostgreSQL: connection exceptions, admin/crash shutdown, cannot connect now, too many
#: connections, serialization failure and deadlock (retry the transaction)
_PG_TRANSIENT_PREFIXES = ("08", "57P0", "53300", "40001", "40P01")
_PG_FULL = ("53100",)  # disk_full
#: MySQL/MariaDB: can't connect, gone away, lost connection, server shutting down, killed,
#: lock wait timeout, deadlock
_MYSQL_TRANSIENT = {1053, 1205, 1213, 1927, 2002, 2003, 2005, 2006, 2013, 2055, 4031}
_MYSQL_FULL = {1021, 1114}  # disk full, table full


def database_errors(*also: type[BaseException]) -> tuple[type[BaseException], ...]:
    """What a database call can raise: SQLAlchemy's errors, OS errors, and the loaded
    drivers' own roots (asyncpg raises some of its errors unwrapped while connecting,
    e.g. ``CannotConnectNowError`` as a server shuts down), and ``also``. A driver not
    imported raised nothing, so it is not imported here."""
    found: list[type[BaseException]] = [SQLAlchemyError, OSError, *also]
    if (asyncpg := sys.modules.get("asyncpg")) is not None:
        found += [asyncpg.PostgresError, asyncpg.InterfaceError]
    if (asyncmy_errors := sys.modules.get("asyncmy.errors")) is not None:
        found.append(asyncmy_errors.Error)
    return tuple(found)


def _driver_error(exc: BaseException) -> BaseException:
    return exc.orig if isinstance(exc, DBAPIError) and exc.orig is not None else exc


def _sqlstate(orig: BaseException) -> str:
    state = getattr(orig, "sqlstate", None) or getattr(orig, "pgcode", None)
    return state if isinstance(state, str) else ""


def _mysql_errno(orig: BaseException) -> int | None:
    args = getattr(orig, "args", ())
    return args[0] if args and isinstance(args[0], int) else None


def is_full(exc: BaseException) -> bool:
    """The database (or its disk) has no room left for the write."""
    orig = _driver_error(exc)
    if isinstance(orig, sqlite3.Error):
        code = getattr(orig, "sqlite_errorcode", None)
        return code == sqlite3.SQLITE_FULL or "database or disk is full" in str(orig)
    if _sqlstate(orig) in _PG_FULL:
        return True
    return _mysql_errno(orig) in _MYSQL_FULL


def is_transient(exc: BaseException) -> bool:
    """Worth a reconnect and retry: a lost connection, a stopped server, a lock timeout."""
    if is_full(exc):
        return False
    if isinstance(exc, OSError):
        return True
    if isinstance(exc, DBAPIError):
        if exc.connection_invalidated or isinstance(exc, OperationalError | InterfaceError):
            return True
    elif not isinstance(exc, database_errors()):  # a driver's own, unwrapped, is read below
        return False
    orig = _driver_error(exc)
    if _sqlstate(orig).startswith(_PG_TRANSIENT_PREFIXES):
        return True
    return _mysql_errno(orig) in _MYSQL_TRANSIENT


def translate_db_error(exc: BaseException, *, where: str = "the database") -> StoreError:
    """A StoreError describing a database failure (statement and parameters left out)."""
    orig = _driver_error(exc)
    detail = str(orig).splitlines()[0] if str(orig) else ""
    if is_full(exc):
        return StoreFullError(f"{where} is full: {detail or type(orig).__name__}")
    if isinstance(exc, IntegrityError):
        return StoreConflictError(f"conflicts with stored data: {detail}")
    return StoreError(f"database error ({type(orig).__name__}): {detail}")
