"""Store test fixtures: a fresh database per test on each of the three backends.

PostgreSQL (127.0.0.1:5432, user postgres) and MariaDB (127.0.0.1:3306, root) get a
``CREATE DATABASE rt_<random>`` per test, dropped afterwards. An unreachable server
skips its tests — except under ``CI=true``, where it fails them.
"""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from pathlib import Path

import pytest
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.ext.asyncio import create_async_engine

from rolltap.store import InjectedFault, Store, WriterHooks
from rolltap.store.ops import WriteOp

BACKENDS = ["sqlite", "postgresql", "mariadb"]
ADMIN_URLS = {
    "postgresql": "postgresql+asyncpg://postgres@127.0.0.1:5432/test",
    "mariadb": "mysql+asyncmy://root@127.0.0.1:3306/test",
}
SCHEMES = {"postgresql": "postgresql://postgres@127.0.0.1:5432", "mariadb": "mysql://root@127.0.0.1:3306"}
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
        yield f"{SCHEMES[backend]}/{name}"
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
    async def action() -> None:
        raise InjectedFault("injected", transient=transient)

    return action


@pytest.fixture
def hooks() -> ScriptedHooks:
    return ScriptedHooks()


@pytest.fixture
async def store(store_url: str, hooks: ScriptedHooks) -> AsyncIterator[Store]:
    async with await Store.open(store_url, upgrade=True, hooks=hooks) as opened:
        yield opened
