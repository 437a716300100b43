"""Store test fixtures: a fresh database per test on each of the three backends.

PostgreSQL (127.0.0.1:5432, user postgres) and MariaDB (127.0.0.1:3306, root) get a
``CREATE DATABASE rt_<random>`` per test, dropped afterwards (``ROLLTAP_TEST_POSTGRES`` and
``ROLLTAP_TEST_MARIADB`` name other admin URLs). An unreachable server
skips its tests — except under ``CI=true``, where it fails them.
"""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from sqlalchemy.engine import make_url
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.ext.asyncio import create_async_engine

from rolltap.store import Store
from store.storekit import ADMIN_URLS, ScriptedHooks

BACKENDS = ["sqlite", "postgresql", "mariadb"]
_unreachable: dict[str, str] = {}


async def _admin(backend: str, statement: str) -> None:
    engine = create_async_engine(ADMIN_URLS[backend], isolation_level="AUTOCOMMIT")
    try:
        async with engine.connect() as conn:
            await asyncio.wait_for(conn.exec_driver_sql(statement), 30)
    finally:
        await engine.dispose()


def _unavailable(backend: str, reason: str) -> None:
    message = f"{backend} server unreachable ({reason}); start it as DEVELOPERS.md says"
    if os.environ.get("CI") == "true":
        pytest.fail(f"{message} — CI=true requires every backend")
    pytest.skip(message)


def fresh_database(backend: str) -> Iterator[str]:
    """Create ``rt_<random>`` on ``backend``, yield its store URL, drop it afterwards."""
    if backend in _unreachable:
        _unavailable(backend, _unreachable[backend])
    name = f"rt_{uuid.uuid4().hex[:12]}"
    create = f"CREATE DATABASE {name}"
    if backend == "mariadb":
        create += " CHARACTER SET utf8mb4 COLLATE utf8mb4_bin"
    try:
        asyncio.run(_admin(backend, create))
    except (OSError, SQLAlchemyError, TimeoutError) as exc:
        _unreachable[backend] = type(exc).__name__
        _unavailable(backend, _unreachable[backend])
    try:
        scheme = "postgresql" if backend == "postgresql" else "mysql"  # the short forms users type
        url = make_url(ADMIN_URLS[backend]).set(drivername=scheme, database=name)
        yield url.render_as_string(hide_password=False)
    finally:
        force = " WITH (FORCE)" if backend == "postgresql" else ""
        asyncio.run(_admin(backend, f"DROP DATABASE IF EXISTS {name}{force}"))


@pytest.fixture(params=BACKENDS)
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A store URL of a fresh, empty database on each backend."""
    backend: str = request.param
    if backend == "sqlite":
        yield f"sqlite:///{tmp_path / 'store.db'}"
        return
    yield from fresh_database(backend)


@pytest.fixture
def hooks() -> ScriptedHooks:
    return ScriptedHooks()


@pytest.fixture
async def store(store_url: str, hooks: ScriptedHooks) -> AsyncIterator[Store]:
    async with await Store.open(store_url, upgrade=True, hooks=hooks) as opened:
        yield opened
