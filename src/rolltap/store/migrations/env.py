"""Alembic environment: runs on the connection the store hands over, else on an async engine.

rolltap configures Alembic programmatically (see ``rolltap.store.migrate``); no
alembic.ini is needed.
"""

from __future__ import annotations

import asyncio

from alembic import context
from sqlalchemy.engine import Connection
from sqlalchemy.ext.asyncio import create_async_engine

from rolltap.store.schema import VERSION_TABLE, metadata


def _run(connection: Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=metadata,
        version_table=VERSION_TABLE,
        render_as_batch=connection.dialect.name == "sqlite",
    )
    with context.begin_transaction():
        context.run_migrations()


async def _run_on_engine(url: str) -> None:
    engine = create_async_engine(url)
    try:
        async with engine.connect() as conn:
            await conn.run_sync(_run)
            await conn.commit()
    finally:
        await engine.dispose()


def _main() -> None:
    connection = context.config.attributes.get("connection")
    if connection is not None:
        _run(connection)
        return
    url = context.config.get_main_option("sqlalchemy.url")
    if not url:
        raise RuntimeError("rolltap migrations need a connection or sqlalchemy.url")
    asyncio.run(_run_on_engine(url))


if context.is_offline_mode():
    raise RuntimeError("rolltap migrations run online only")
_main()
