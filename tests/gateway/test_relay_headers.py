"""Which upstream response headers reach the harness: llama-server's empty CORS header must not."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest

from helpers import GatewayFactory, register
from rolltap.config.endpoint import Dialect
from rolltap.sim import SimConfig, Simulator

#: what llama-server sends on a request without ``Origin``, plus other CORS and a per-origin
#: header; the simulator's own ``x-sim-request-id`` stands for the headers that are relayed
UPSTREAM_HEADERS = {
    "Access-Control-Allow-Origin": "",
    "Access-Control-Allow-Credentials": "true",
    "Alt-Svc": 'h3=":443"',
    "X-Empty": "",
}
CHAT = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
MESSAGES = {"model": "m", "max_tokens": 8, "messages": [{"role": "user", "content": "hi"}]}


@pytest.fixture
async def sim() -> AsyncIterator[Simulator]:
    async with Simulator(SimConfig(seed=7, response_headers=UPSTREAM_HEADERS)) as simulator:
        yield simulator


def _names(resp: aiohttp.ClientResponse) -> dict[str, str]:
    return {k.decode().lower(): v.decode() for k, v in resp.raw_headers}


async def test_the_simulator_sends_the_empty_header(
    sim: Simulator, http: aiohttp.ClientSession
) -> None:
    """The upstream really sends what the gateway must drop (so the test below can fail)."""
    async with http.post(sim.base_url + "/chat/completions", json=CHAT) as resp:
        assert resp.status == 200
        headers = _names(resp)
    assert headers["access-control-allow-origin"] == ""
    assert headers["x-empty"] == ""


@pytest.mark.parametrize(
    ("upstream", "route", "body"),
    [
        ("chat", "/chat/completions", CHAT),
        ("chat", "/chat/completions", {**CHAT, "stream": True}),
        ("messages", "/messages", MESSAGES),
        ("chat", "/messages", {**MESSAGES, "stream": True}),
        ("messages", "/messages/count_tokens", {"model": "m", "messages": MESSAGES["messages"]}),
    ],
    ids=["chat", "chat-stream", "messages", "messages-to-chat-stream", "count-tokens"],
)
async def test_no_cors_and_no_empty_header_reaches_the_harness(
    upstream: Dialect, route: str, body: dict[str, Any],
    make_gateway: GatewayFactory, http: aiohttp.ClientSession,
) -> None:  # fmt: skip
    gateway = await make_gateway(dialect=upstream)
    rollout = await register(http, gateway)
    auth = {"Authorization": f"Bearer {rollout['api_key']}"}
    async with http.post(rollout["base_url"] + route, json=body, headers=auth) as resp:
        assert resp.status == 200, await resp.text()
        await resp.read()
        headers = _names(resp)
    assert [k for k, v in headers.items() if not v.strip()] == []
    assert [k for k in headers if k.startswith("access-control-")] == []
    assert "alt-svc" not in headers
    # the upstream's other headers (request ids, rate limits, …) are still relayed
    assert headers["x-sim-request-id"].startswith("sim-")
