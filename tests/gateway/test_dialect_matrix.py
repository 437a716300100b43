"""Conformance matrix: every harness dialect against every upstream dialect.

Harness {chat, messages, responses} × upstream {chat, messages, responses}, stream
and not, text and a two-turn tool loop, each driven by the dialect's official SDK.
The simulator gives the same answer to the same conversation on every route, so
the reference for each case is the harness's SDK talking to the simulator directly
in its own dialect: through the gateway, translated or not, it must read the same.
"""

from __future__ import annotations

import json
from contextlib import AbstractAsyncContextManager
from typing import Any

import aiohttp
import pytest

from gateway.dialect_drivers import Driver, Turn, driver
from helpers import GatewayFactory, events, register
from rolltap.config.endpoint import Dialect
from rolltap.sim import Simulator

DIALECTS: list[Dialect] = ["chat", "messages", "responses"]
pytestmark = [
    pytest.mark.parametrize("harness", DIALECTS),
    pytest.mark.parametrize("upstream", DIALECTS),
    pytest.mark.parametrize("stream", [False, True], ids=["body", "stream"]),
]


def _direct(harness: str, sim: Simulator) -> AbstractAsyncContextManager[Driver]:
    return driver(harness, openai_base_url=sim.base_url, anthropic_base_url=sim.url,
                  api_key="k")  # fmt: skip


def _through(harness: str, rollout: dict[str, Any]) -> AbstractAsyncContextManager[Driver]:
    return driver(harness, openai_base_url=rollout["openai_base_url"],
                  anthropic_base_url=rollout["anthropic_base_url"],
                  api_key=rollout["api_key"])  # fmt: skip


def _same(got: Turn, want: Turn) -> None:
    assert got.text == want.text
    assert [(n, json.loads(a)) for _, n, a in got.calls] == [
        (n, json.loads(a)) for _, n, a in want.calls
    ]
    assert got.stop == want.stop
    assert got.output_tokens == want.output_tokens


async def test_text(
    harness: str, upstream: Dialect, stream: bool, sim: Simulator,
    make_gateway: GatewayFactory, http: aiohttp.ClientSession,
) -> None:  # fmt: skip
    async with _direct(harness, sim) as direct:
        want = await direct.turn(direct.start("hello there"), tools=False, stream=stream)
    gateway = await make_gateway(dialect=upstream)
    rollout = await register(http, gateway)
    async with _through(harness, rollout) as client:
        got = await client.turn(client.start("hello there"), tools=False, stream=stream)
    _same(got, want)
    assert got.text
    request, response = (e["payload"] for e in await events(http, gateway, rollout["id"]))
    assert (request["dialect"], request["upstream_dialect"]) == (harness, upstream)
    assert request["stream"] is stream
    assert response["dialect"] == upstream
    assert response["usage"]["completion_tokens"] == got.output_tokens
    assert response["finish_reason"] == "stop"


async def test_tool_loop(
    harness: str, upstream: Dialect, stream: bool, sim: Simulator,
    make_gateway: GatewayFactory, http: aiohttp.ClientSession,
) -> None:  # fmt: skip
    async with _direct(harness, sim) as direct:
        want_convo = direct.start("add 2 and 3")
        want_call = await direct.turn(want_convo, tools=True, stream=stream)
        direct.add_results(want_convo, want_call, "5")
        want_text = await direct.turn(want_convo, tools=True, stream=stream)

    gateway = await make_gateway(dialect=upstream)
    rollout = await register(http, gateway)
    async with _through(harness, rollout) as client:
        convo = client.start("add 2 and 3")
        call = await client.turn(convo, tools=True, stream=stream)
        _same(call, want_call)
        assert call.stop == "tool" and call.calls
        client.add_results(convo, call, "5")
        text = await client.turn(convo, tools=True, stream=stream)
    _same(text, want_text)
    assert text.stop == "end" and text.text

    evs = await events(http, gateway, rollout["id"])
    assert [e["kind"] for e in evs] == ["model_request", "model_response"] * 2
    assert evs[1]["payload"]["finish_reason"] == "tool_calls"
    # the second request extends the first: only the new turns are recorded
    assert evs[2]["payload"]["prefix_messages"] >= 1
