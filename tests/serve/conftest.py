"""Serve fixtures: services in front of the simulator, on SQLite unless told otherwise."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from rolltap.config import EndpointConfig
from rolltap.serve import ServeConfig, Service
from rolltap.sim import Simulator
from rolltap.store import Store, WriterHooks
from serve.servekit import TOKEN, ServiceFactory
from store.conftest import fresh_database


@pytest.fixture
async def start_service(sim: Simulator, tmp_path: Path) -> AsyncIterator[ServiceFactory]:
    """Start services (2 workers, 0.2 s heartbeats, test hooks on); all closed at teardown.

    ``store_hooks`` (WriterHooks) goes to the service, the rest to its config."""
    services: list[Service] = []

    async def start(store_hooks: WriterHooks | None = None, **overrides: Any) -> Service:
        values: dict[str, Any] = {
            "workers": 2,
            "port": 0,
            "token": TOKEN,
            "store": f"sqlite:///{tmp_path / 'serve.db'}",
            "endpoints": [EndpointConfig(base_url=sim.base_url, model="sim-model")],
            "stats_interval_s": 0.2,
            "heartbeat_timeout_s": 30.0,
            "max_inflight": 8,
            "test_hooks": True,
        }
        values.update(overrides)
        service = Service(ServeConfig(**values), keepalive_s=5.0, store_hooks=store_hooks)
        await service.start()
        services.append(service)
        return service

    yield start
    for service in services:
        await service.aclose()


@pytest.fixture(params=["sqlite", "postgresql", "mariadb"])
def serve_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """SQLite (the supervisor writes) and the server databases (each worker writes)."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'serve.db'}"
        return
    yield from fresh_database(request.param)


def upgraded_database(backend: str) -> Iterator[str]:
    """:func:`fresh_database`, upgraded to the current schema."""
    for url in fresh_database(backend):
        asyncio.run(_upgrade(url))
        yield url


async def _upgrade(url: str) -> None:
    async with await Store.open(url, upgrade=True):
        pass  # a server database is upgraded by its operator (rolltap db upgrade)
