"""What every model route shares, over HTTP: faults, pacing, gates and stats."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import aiohttp
import orjson
import pytest

from rolltap.sim import SimConfig, Simulator
from sim.simkit import (
    chat_body,
    completions_body,
    llamacpp_body,
    messages_body,
    read_named_events,
    responses_body,
)

Body = Callable[..., dict[str, Any]]
ROUTES: dict[str, tuple[str, Body]] = {
    "chat": ("/v1/chat/completions", chat_body),
    "messages": ("/v1/messages", messages_body),
    "responses": ("/v1/responses", responses_body),
    "completions": ("/v1/completions", completions_body),
    "llamacpp": ("/completion", llamacpp_body),
}


def _fault(spec: str) -> dict[str, str]:
    return {"x-sim-fault": spec}


@pytest.mark.parametrize("route", ROUTES)
async def test_status_fault_takes_the_route_error_shape(
    sim: Simulator, session: aiohttp.ClientSession, route: str
) -> None:
    path, body = ROUTES[route]
    async with session.post(sim.url + path, json=body(), headers=_fault("status=503")) as resp:
        assert resp.status == 503
        assert resp.headers["Retry-After"] == "1"
        error = await resp.json()
    if route == "messages":
        assert error == {
            "type": "error",
            "error": {"type": "api_error", "message": "simulated fault: HTTP 503"},
        }
    else:
        assert error["error"]["type"] == "server_error"
    assert sim.stats.faults == {"status": 1}


@pytest.mark.parametrize("route", ROUTES)
@pytest.mark.parametrize("events", [0, 2])
async def test_drop_mid_stream(
    sim: Simulator, session: aiohttp.ClientSession, route: str, events: int
) -> None:
    path, body = ROUTES[route]
    got: list[tuple[str, bytes]] = []
    async with session.post(
        sim.url + path, json=body(stream=True), headers=_fault(f"drop={events}")
    ) as resp:
        with pytest.raises(aiohttp.ClientPayloadError):
            await read_named_events(resp, into=got)
    assert len(got) == events
    stats = await sim.wait_for(lambda s: s.in_flight == 0)
    assert (stats.faults, stats.completed, stats.disconnected) == ({"drop": 1}, 0, 0)


@pytest.mark.parametrize("route", ROUTES)
async def test_malformed_stream_event_after_the_first(
    sim: Simulator, session: aiohttp.ClientSession, route: str
) -> None:
    path, body = ROUTES[route]
    async with session.post(
        sim.url + path, json=body(stream=True), headers=_fault("malformed")
    ) as resp:
        events = await read_named_events(resp)
    assert len(events) == 2
    orjson.loads(events[0][1])
    assert events[1][1] == b"{not json"


@pytest.mark.parametrize("route", [*ROUTES, "count_tokens"])
async def test_malformed_non_stream(
    sim: Simulator, session: aiohttp.ClientSession, route: str
) -> None:
    path, body = ROUTES.get(route, ("/v1/messages/count_tokens", messages_body))
    async with session.post(sim.url + path, json=body(), headers=_fault("malformed")) as resp:
        assert resp.status == 200
        raw = await resp.read()
    with pytest.raises(orjson.JSONDecodeError):
        orjson.loads(raw)


@pytest.mark.parametrize("route", ROUTES)
async def test_pacing_keeps_the_words(session: aiohttp.ClientSession, route: str) -> None:
    path, body = ROUTES[route]
    paced = SimConfig(seed=1, completion_tokens=4, ttft_ms=5, tokens_per_s=2000)
    async with Simulator(SimConfig(seed=1, completion_tokens=4)) as fast, Simulator(paced) as slow:
        streams = []
        for sim in (fast, slow):
            async with session.post(sim.url + path, json=body(stream=True)) as resp:
                streams.append(await read_named_events(resp))
    # Both answer their first request, so only the timestamps may differ.
    untimed = [[(n, re.sub(rb'"created(_at)?":\d+', b"", d)) for n, d in s] for s in streams]
    assert untimed[0] == untimed[1]
    assert len(untimed[0]) > 4


async def test_count_tokens_faults_gates_and_stats(
    sim: Simulator, session: aiohttp.ClientSession
) -> None:
    url = sim.url + "/v1/messages/count_tokens"
    body = {"model": "m", "messages": [{"role": "user", "content": "Say something."}]}
    sim.gate("open").open()
    async with session.post(url, json=body, headers={"x-sim-gate": "open"}) as resp:
        assert await resp.json() == {"input_tokens": len("Say something.") // 4 + 1}
    async with session.post(url, json=body, headers=_fault("status=429")) as resp:
        assert resp.status == 429
        assert (await resp.json())["error"]["type"] == "rate_limit_error"
    async with session.post(url, json={"model": "m"}) as resp:
        assert resp.status == 400
        assert (await resp.json())["error"]["type"] == "invalid_request_error"
    assert (sim.stats.requests, sim.stats.completed) == (3, 3)


async def test_every_model_route_counts_and_others_do_not(
    sim: Simulator, session: aiohttp.ClientSession
) -> None:
    for path, body in ROUTES.values():
        async with session.post(sim.url + path, json=body()) as resp:
            assert resp.status == 200
    async with session.get(sim.url + "/v1/messages") as resp:
        assert resp.status == 405
        assert (await resp.json())["type"] == "error"
    async with session.get(sim.url + "/health") as resp:
        assert resp.status == 200
    assert (sim.stats.requests, sim.stats.completed) == (len(ROUTES), len(ROUTES))
