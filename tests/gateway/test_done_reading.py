"""A harness that stops reading at its stream's last event — as Codex CLI does at
``response.completed`` and Claude Code at ``message_stop`` — and hangs up while the upstream
still holds its connection open had the whole answer: the call records its response, not
``harness_disconnected``."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import aiohttp
import pytest

from helpers import ADMIN_TOKEN, events, register, settle
from rolltap.config import EndpointConfig, GatewaySettings
from rolltap.config.endpoint import Dialect
from rolltap.gateway import Gateway
from rolltap.sim import Simulator
from upstreams import recording

#: each dialect's terminal event, as its harness sees it
_LAST = {"chat": b"data: [DONE]", "messages": b"event: message_stop",
         "responses": b"event: response.completed"}  # fmt: skip
_BODIES = {
    "chat": {"model": "m", "stream": True, "messages": [{"role": "user", "content": "hi"}]},
    "messages": {"model": "m", "stream": True, "max_tokens": 16,
                 "messages": [{"role": "user", "content": "hi"}]},
    "responses": {"model": "m", "stream": True, "input": "hi"},
}  # fmt: skip
_ROUTES = {"chat": "/chat/completions", "messages": "/messages", "responses": "/responses"}


@pytest.fixture
async def holding(sim: Simulator) -> AsyncIterator[tuple[str, asyncio.Event]]:
    """An upstream that relays the simulator's stream whole, then keeps its connection
    open until released: the harness has every event before the upstream ends."""
    release = asyncio.Event()
    async with recording(sim.url, hold=release) as (url, _):
        yield url + "/v1", release
        release.set()


@pytest.mark.parametrize(("harness", "upstream"), [
    ("responses", "responses"), ("messages", "messages"), ("chat", "chat"),
    ("responses", "chat"), ("messages", "chat"),
])  # fmt: skip
async def test_a_harness_done_reading_at_the_last_event_gets_its_answer_recorded(
    harness: str, upstream: Dialect, holding: tuple[str, asyncio.Event],
    http: aiohttp.ClientSession,
) -> None:  # fmt: skip
    base_url, _ = holding
    endpoint = EndpointConfig(base_url=base_url, model="sim-model", dialect=upstream)
    gateway = Gateway(endpoint, GatewaySettings(admin_token=ADMIN_TOKEN))
    await gateway.start()
    try:
        rollout = await register(http, gateway)
        auth = {"Authorization": f"Bearer {rollout['api_key']}"}
        url = rollout["base_url"] + _ROUTES[harness]
        async with http.post(url, json=_BODIES[harness], headers=auth) as resp:
            assert resp.status == 200
            async for line in resp.content:
                if line.startswith(_LAST[harness]):
                    break  # done reading: hang up, as the agents do
            resp.close()
        await settle(lambda: gateway.snapshot()["intercepts"] == 0)
        kinds = [(e["kind"], e["payload"].get("status")) for e in
                 await events(http, gateway, rollout["id"])]  # fmt: skip
    finally:
        await gateway.aclose()
    assert kinds == [("model_request", None), ("model_response", 200)]
