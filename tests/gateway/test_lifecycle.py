"""Incremental relay, disconnects, unregister and abort: synchronised on events, never on time."""

from __future__ import annotations

import asyncio
from typing import Any

import aiohttp
import openai
import pytest

from helpers import ADMIN_HEADERS, GatewayFactory, events, openai_client, register, settle
from rolltap.config import Timeouts
from rolltap.gateway import Gateway
from rolltap.sim import Simulator


async def test_stream_is_relayed_chunk_by_chunk(
    gateway: Gateway, sim: Simulator, http: aiohttp.ClientSession
) -> None:
    """The simulator holds its stream after the first chunk; the harness must already
    have that chunk through the gateway before the test opens the gate."""
    gate = sim.gate("first")
    rollout = await register(http, gateway)
    async with openai_client(rollout, default_headers={"x-sim-gate": "first"}) as client:
        stream = await client.chat.completions.create(
            model="m", messages=[{"role": "user", "content": "hi"}], stream=True
        )
        async with stream:
            first = await anext(aiter(stream))
            await gate.wait_reached()  # the upstream is still holding the rest
            assert first.choices[0].delta.role == "assistant"
            assert sim.stats.completed == 0
            gate.open()
            rest = [chunk async for chunk in stream]
    assert rest and rest[-1].choices[0].finish_reason == "stop"
    assert gateway.snapshot()["intercepts"] == 0


async def test_harness_disconnect_mid_stream_cancels_the_upstream_call(
    gateway: Gateway, sim: Simulator, http: aiohttp.ClientSession
) -> None:
    sim.gate("hold")
    rollout = await register(http, gateway)
    async with openai_client(rollout, default_headers={"x-sim-gate": "hold"}) as client:
        stream = await client.chat.completions.create(
            model="m", messages=[{"role": "user", "content": "hi"}], stream=True
        )
        await anext(aiter(stream))
        await stream.close()  # the harness goes away while the upstream holds
    await sim.wait_for(lambda s: s.disconnected == 1)
    assert sim.stats.completed == 0
    await settle(lambda: gateway.snapshot()["intercepts"] == 0)
    errors = [e for e in await events(http, gateway, rollout["id"]) if e["kind"] == "model_error"]
    assert errors[0]["payload"]["code"] == "harness_disconnected"


@pytest.mark.parametrize("stream", [False, True])
async def test_unregister_unblocks_an_in_flight_call(
    gateway: Gateway, sim: Simulator, http: aiohttp.ClientSession, stream: bool
) -> None:
    gate = sim.gate("held")
    rollout = await register(http, gateway)
    async with openai_client(rollout, default_headers={"x-sim-gate": "held"}) as client:

        async def call() -> None:
            response = await client.chat.completions.create(
                model="m", messages=[{"role": "user", "content": "hi"}], stream=stream
            )
            if stream:
                async for _ in response:  # type: ignore[union-attr]
                    pass

        task = asyncio.ensure_future(call())
        try:
            await gate.wait_reached()
            async with http.delete(
                f"{gateway.admin_url}/rollouts/{rollout['id']}", headers=ADMIN_HEADERS
            ) as resp:
                assert resp.status == 200
                body = await resp.json()
            with pytest.raises(openai.APIError) as info:
                await task
        finally:
            task.cancel()
    assert info.value.code == "rollout_closed"
    if not stream:
        assert isinstance(info.value, openai.APIStatusError)
        assert info.value.status_code == 409
    assert body["events"] == 2  # the request and the error
    await sim.wait_for(lambda s: s.disconnected == 1)  # the upstream call was cancelled
    assert gateway.snapshot()["intercepts"] == 0
    assert gateway.pool.snapshot().leases == 0


async def test_abort_cancels_in_flight_calls_and_keeps_the_shared_client(
    make_gateway: GatewayFactory, sim: Simulator, http: aiohttp.ClientSession
) -> None:
    """With one upstream connection, a second rollout can only finish if the aborted
    call gave its connection back."""
    gateway: Gateway = await make_gateway(max_connections=1)
    gate = sim.gate("stuck")
    a = await register(http, gateway)
    b = await register(http, gateway)
    async with openai_client(a, default_headers={"x-sim-gate": "stuck"}) as client_a:
        task = asyncio.ensure_future(
            client_a.chat.completions.create(model="m", messages=[{"role": "user", "content": "a"}])
        )
        try:
            await gate.wait_reached()
            await gateway.abort(a["id"])
            with pytest.raises(openai.APIStatusError) as info:
                await task
        finally:
            task.cancel()
    assert info.value.status_code == 409
    async with openai_client(b) as client_b:
        reply = await client_b.chat.completions.create(
            model="m", messages=[{"role": "user", "content": "b"}]
        )
    assert reply.choices[0].message.content
    snap = gateway.pool.snapshot()
    assert snap.clients == 1 and snap.constructions == 1


async def test_a_call_waiting_for_a_pooled_connection_is_not_a_connect_timeout(
    make_gateway: GatewayFactory, sim: Simulator, http: aiohttp.ClientSession
) -> None:
    """The connect timeout bounds making a connection, not the wait for one of the
    endpoint's ``max_connections``: that wait once failed calls as ``upstream_timeout``."""
    gateway: Gateway = await make_gateway(max_connections=1, timeouts=Timeouts(connect=0.05))
    gate = sim.gate("busy")
    a, b = await register(http, gateway), await register(http, gateway)
    messages: Any = [{"role": "user", "content": "hi"}]
    async with (
        openai_client(a, default_headers={"x-sim-gate": "busy"}) as client_a,
        openai_client(b) as client_b,
    ):
        first = asyncio.ensure_future(
            client_a.chat.completions.create(model="m", messages=messages)
        )
        second: asyncio.Future[Any] | None = None
        try:
            await gate.wait_reached()  # the one connection is busy
            second = asyncio.ensure_future(
                client_b.chat.completions.create(model="m", messages=messages)
            )
            await settle(lambda: gateway.snapshot()["intercepts"] == 2)
            # the second call waits for the connection, far past the connect timeout
            await asyncio.sleep(0.5)
            assert not second.done()
            gate.open()
            replies = [await first, await second]
        finally:
            for call in (first, second):
                if call is not None:
                    call.cancel()
    assert all(reply.choices[0].message.content for reply in replies)
    assert sim.stats.connections == 1


async def test_two_hundred_rollouts_share_one_client_within_its_connection_limit(
    make_gateway: GatewayFactory, sim: Simulator, http: aiohttp.ClientSession
) -> None:
    gateway: Gateway = await make_gateway(max_connections=8)
    rollouts = [await register(http, gateway) for _ in range(200)]

    async def one(rollout: dict[str, Any]) -> None:
        async with openai_client(rollout) as client:
            await client.chat.completions.create(
                model="m", messages=[{"role": "user", "content": "hi"}]
            )

    async with asyncio.TaskGroup() as tg:
        for rollout in rollouts:
            tg.create_task(one(rollout))
    assert sim.stats.completed == 200
    assert gateway.pool.snapshot().constructions == 1
    assert sim.stats.peak_in_flight <= 8
    assert sim.stats.connections <= 8
    assert gateway.snapshot()["servers"] == 7  # ceil(200 / 32)


async def test_servers_are_elastic_least_loaded_and_closed_when_idle(
    make_gateway: GatewayFactory, http: aiohttp.ClientSession
) -> None:
    gateway: Gateway = await make_gateway(multiplex=2, idle_grace_s=0)
    rollouts = [await register(http, gateway) for _ in range(5)]
    assert [s["rollouts"] for s in gateway.snapshot()["server_loads"]] == [2, 2, 1]
    await gateway.unregister(rollouts[0]["id"])
    # least loaded with room: the first server (1 rollout) beats the third (1) by order
    sixth = await register(http, gateway)
    assert sixth["base_url"].startswith(gateway.servers[0].url)
    for rollout in [*rollouts[1:], sixth]:
        await gateway.unregister(rollout["id"])
    await settle(lambda: len(gateway.servers) == 1)  # the admin server stays


async def test_the_request_event_is_written_while_the_upstream_holds_the_call(
    gateway: Gateway, sim: Simulator, http: aiohttp.ClientSession
) -> None:
    """The request event is written once the request is on its way (not before it
    leaves), yet before the upstream answers, and first among the call's events."""
    gate = sim.gate("held")
    rollout = await register(http, gateway)
    async with openai_client(rollout, default_headers={"x-sim-gate": "held"}) as client:
        call = asyncio.ensure_future(
            client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])
        )
        try:
            await gate.wait_reached()  # the upstream has the request and holds it
            held = await events(http, gateway, rollout["id"])
            assert [e["kind"] for e in held] == ["model_request"]
            assert held[0]["payload"]["messages"] == [{"role": "user", "content": "hi"}]
            gate.open()
            answer = await call
        finally:
            call.cancel()
    assert answer.choices[0].message.content
    kinds = [e["kind"] for e in await events(http, gateway, rollout["id"])]
    assert kinds == ["model_request", "model_response"]
