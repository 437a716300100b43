"""Fixtures for the simulator tests: a running simulator and clients pointed at it."""

from __future__ import annotations

from collections.abc import AsyncIterator

import aiohttp
import anthropic
import openai
import pytest

from rolltap.sim import SimConfig, Simulator


@pytest.fixture
async def sim() -> AsyncIterator[Simulator]:
    async with Simulator(SimConfig(seed=7)) as running:
        yield running


@pytest.fixture
async def client(sim: Simulator) -> AsyncIterator[openai.AsyncOpenAI]:
    async with openai.AsyncOpenAI(base_url=sim.base_url, api_key="k", max_retries=0) as sdk:
        yield sdk


@pytest.fixture
async def claude(sim: Simulator) -> AsyncIterator[anthropic.AsyncAnthropic]:
    # The Anthropic SDK appends /v1/messages itself, so it takes the bare server URL.
    async with anthropic.AsyncAnthropic(base_url=sim.url, api_key="k", max_retries=0) as sdk:
        yield sdk


@pytest.fixture
async def session() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as http:
        yield http
