"""Store URLs: ``sqlite:///path.db``, ``postgresql://…``, ``mysql://…`` or full SQLAlchemy URLs.

Short schemes are mapped to the async drivers rolltap ships with (aiosqlite, asyncpg,
asyncmy); a full SQLAlchemy URL must name an async driver.

>>> str(to_sqlalchemy_url("postgresql://u:secret@db/x"))
'postgresql+asyncpg://u:***@db/x'
>>> mask_url("mysql://root:hunter2@127.0.0.1/test")
'mysql://root:***@127.0.0.1/test'
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import ArgumentError, NoSuchModuleError

from rolltap.errors import ConfigError

__all__ = [
    "DEFAULT_STORE_URL",
    "STORE_ENV",
    "backend_of",
    "mask_url",
    "resolve_store_url",
    "sqlite_path",
    "to_sqlalchemy_url",
]

#: environment variable that names the store when ``--store`` is not given
STORE_ENV = "ROLLTAP_STORE"
#: the store used when neither ``--store`` nor ``ROLLTAP_STORE`` is set
DEFAULT_STORE_URL = "sqlite:///rolltap.db"

_ASYNC_DRIVERS = {
    "sqlite": "sqlite+aiosqlite",
    "postgresql": "postgresql+asyncpg",
    "postgres": "postgresql+asyncpg",
    "mysql": "mysql+asyncmy",
    "mariadb": "mysql+asyncmy",
}


def resolve_store_url(url: str | None = None, environ: Mapping[str, str] | None = None) -> str:
    """``url`` if given, else ``ROLLTAP_STORE``, else :data:`DEFAULT_STORE_URL`."""
    if url:
        return url
    env = os.environ if environ is None else environ
    return env.get(STORE_ENV) or DEFAULT_STORE_URL


def mask_url(url: str | URL) -> str:
    """The URL with its password replaced by ``***`` (safe for messages and logs)."""
    try:
        parsed = url if isinstance(url, URL) else make_url(url)
    except ArgumentError:
        return "<unparseable store URL>"
    return parsed.render_as_string(hide_password=True)


def to_sqlalchemy_url(url: str | URL) -> URL:
    """Map a store URL to a SQLAlchemy URL with an async driver; ConfigError if impossible."""
    try:
        parsed = url if isinstance(url, URL) else make_url(url)
    except ArgumentError as exc:
        raise ConfigError(_not_a_url(str(url))) from exc
    if "+" not in parsed.drivername:
        if parsed.drivername not in _ASYNC_DRIVERS:
            raise ConfigError(f"unsupported store scheme {parsed.drivername!r}")
        parsed = parsed.set(drivername=_ASYNC_DRIVERS[parsed.drivername])
    try:
        dialect = parsed.get_dialect()
    except NoSuchModuleError as exc:
        raise ConfigError(f"unknown database driver in {mask_url(parsed)}") from exc
    if not dialect.is_async:
        raise ConfigError(f"{mask_url(parsed)}: the driver must be async (e.g. asyncpg)")
    if backend_of(parsed) == "sqlite" and sqlite_path(parsed) is None:
        raise ConfigError("an in-memory SQLite store is not supported; use sqlite:///file.db")
    if backend_of(parsed) == "mysql" and "charset" not in parsed.query:
        parsed = parsed.update_query_dict({"charset": "utf8mb4"})
    return parsed


def _not_a_url(url: str) -> str:
    """What to say of a ``--store`` value that is no URL. One with neither ``:`` nor
    ``@`` holds no credential, and is most likely a file meant as a SQLite store: it is
    named, with the URL that says so; anything else is not shown (it may hold a
    password)."""
    forms = "sqlite:///FILE.db, postgresql://USER@HOST/DB or mysql://USER@HOST/DB"
    if ":" not in url and "@" not in url:
        sqlite = f"sqlite:///{Path(url).expanduser()}"
        return f"not a store URL: {url!r} (a SQLite file is {sqlite}; stores are {forms})"
    return f"not a store URL: {mask_url(url)} (stores are {forms})"


def backend_of(url: URL) -> str:
    """``sqlite``, ``postgresql`` or ``mysql`` (MariaDB included)."""
    name = url.get_backend_name()
    return "mysql" if name == "mariadb" else name


def sqlite_path(url: URL) -> Path | None:
    """The database file of a SQLite URL; None for an in-memory database."""
    database = url.database
    if not database or database == ":memory:" or url.query.get("mode") == "memory":
        return None
    return Path(database)
