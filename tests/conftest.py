"""Shared fixtures: a simulated upstream, a gateway in front of it, SDK clients."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest

from helpers import ADMIN_TOKEN, GatewayFactory
from rolltap.config import EndpointConfig, GatewaySettings, Timeouts
from rolltap.config.endpoint import Dialect
from rolltap.gateway import Gateway
from rolltap.sim import SimConfig, Simulator

# The Ray tests' clusters live on loopback: without this Ray resolves 127.0.0.1 to the
# machine's network address (read when ray is imported; inherited by the CLI processes
# and the cluster's own processes, which the tests start)
os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")


@pytest.fixture
async def sim() -> AsyncIterator[Simulator]:
    async with Simulator(SimConfig(seed=7)) as simulator:
        yield simulator


@pytest.fixture
async def make_gateway(sim: Simulator) -> AsyncIterator[GatewayFactory]:
    """Build gateways in front of ``sim``; all are closed at teardown."""
    gateways: list[Gateway] = []

    async def factory(
        *,
        timeouts: Timeouts | None = None,
        max_connections: int = 256,
        dialect: Dialect = "chat",
        **settings: Any,
    ) -> Gateway:
        endpoint = EndpointConfig(
            base_url=sim.base_url,
            model="sim-model",
            dialect=dialect,
            timeouts=timeouts or Timeouts(),
            max_connections=max_connections,
        )
        config = GatewaySettings(admin_token=ADMIN_TOKEN, **settings)
        gateway = Gateway(endpoint, config)
        await gateway.start()
        gateways.append(gateway)
        return gateway

    yield factory
    for gateway in gateways:
        await gateway.aclose()


@pytest.fixture
async def gateway(make_gateway: GatewayFactory) -> Gateway:
    return await make_gateway()


@pytest.fixture
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as session:
        yield session
