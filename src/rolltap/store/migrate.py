"""Schema migrations with Alembic, configured programmatically (no alembic.ini).

>>> head_revision()
'0006'
"""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy.engine import URL, Connection
from sqlalchemy.ext.asyncio import AsyncEngine

from rolltap.store.engine import create_engine
from rolltap.store.errors import SchemaVersionError
from rolltap.store.opening import check_sqlite_file, open_errors, translate_open_error
from rolltap.store.schema import VERSION_TABLE
from rolltap.store.url import backend_of, mask_url, sqlite_path, to_sqlalchemy_url

__all__ = ["alembic_config", "ensure_schema", "head_revision", "upgrade"]

_SCRIPTS = Path(__file__).parent / "migrations"


def alembic_config() -> Config:
    """An Alembic config for the packaged migrations (pass a connection in ``attributes``)."""
    config = Config()
    config.set_main_option("script_location", str(_SCRIPTS))
    return config


def head_revision() -> str:
    head = ScriptDirectory.from_config(alembic_config()).get_current_head()
    assert head is not None
    return head


def _current(conn: Connection) -> str | None:
    context = MigrationContext.configure(conn, opts={"version_table": VERSION_TABLE})
    return context.get_current_revision()


def _upgrade(conn: Connection, revision: str) -> None:
    config = alembic_config()
    config.attributes["connection"] = conn
    command.upgrade(config, revision)


async def ensure_schema(engine: AsyncEngine, *, auto_upgrade: bool) -> str:
    """Check the schema is at head; upgrade it when ``auto_upgrade``. The revision."""
    head = head_revision()
    try:
        async with engine.connect() as conn:
            current = await conn.run_sync(_current)
            if current == head:
                return head
            if not auto_upgrade:
                raise SchemaVersionError(
                    f"store {mask_url(engine.url)} is at schema {current or 'none'}, "
                    f"this rolltap needs {head}: run `rolltap db upgrade --store URL`"
                )
            await conn.run_sync(_upgrade, head)
            await conn.commit()
    except open_errors(engine.url) as exc:
        raise translate_open_error(exc, engine.url) from exc
    return head


async def upgrade(url: str | URL, revision: str = "head") -> str:
    """Apply migrations to the store at ``url``; the revision it is at afterwards.

    >>> import asyncio
    >>> asyncio.run(upgrade("sqlite:///runs.db"))  # doctest: +SKIP
    '0006'
    """
    sa_url = to_sqlalchemy_url(url)
    path = sqlite_path(sa_url) if backend_of(sa_url) == "sqlite" else None
    if path is not None:
        await check_sqlite_file(path)
    engine = create_engine(sa_url)
    try:
        async with engine.connect() as conn:
            await conn.run_sync(_upgrade, revision)
            await conn.commit()
            current = await conn.run_sync(_current)
    except open_errors(engine.url) as exc:
        raise translate_open_error(exc, engine.url) from exc
    finally:
        await engine.dispose()
    return current or "base"
