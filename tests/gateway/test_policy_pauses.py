"""Pauses as a trainer makes them around a weight update, with the OpenAI SDK as the
harness: ``hold`` (calls wait, in arrival order; in-flight ones run on), ``drain`` (the
pause answers once nothing is in flight), ``abort`` (in-flight relayed calls are cut),
``pause_max_s`` (a call waits that long at most), and a shutdown while calls are held."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import openai
import pytest

from gateway.policykit import (
    admin,
    answered_now,
    engines_and_gateway,
    gate,
    gateway_over,
    of_kind,
    outcome,
)
from helpers import GatewayFactory, events, openai_client, register, settle
from rolltap.config import EndpointConfig
from rolltap.sim import SimConfig, Simulator
from upstreams import recording


def _ask(text: str) -> list[Any]:
    return [{"role": "user", "content": text}]


@pytest.fixture
async def slow_sim() -> AsyncIterator[Simulator]:
    """A simulator whose answers take a while: calls stay in flight while a test pauses."""
    async with Simulator(SimConfig(seed=7, ttft_ms=400, tokens_per_s=200)) as simulator:
        yield simulator


async def test_hold_lets_calls_in_flight_finish_and_holds_new_ones_until_resume(
    slow_sim: Simulator, http: aiohttp.ClientSession
) -> None:
    ep = EndpointConfig(base_url=slow_sim.base_url, model="sim-model")
    async with gateway_over(ep) as gateway:
        rollouts = [await register(http, gateway) for _ in range(4)]
        clients = [openai_client(r) for r in rollouts]
        ask = [c.chat.completions.create for c in clients]
        async with asyncio.TaskGroup() as tasks:
            early = [tasks.create_task(outcome(ask[i](model="m", messages=_ask(f"e{i}"))))
                     for i in (0, 1)]  # fmt: skip
            await settle(lambda: gate(gateway)["in_flight"] == 2)
            doc = await gateway.pause("hold")  # at once, with both in flight
            assert doc["endpoints"]["default"]["in_flight"] == 2
            late = []
            for n, i in enumerate((2, 3), start=1):
                late.append(tasks.create_task(outcome(ask[i](model="m", messages=_ask(f"l{i}")))))
                await settle(lambda n=n: gate(gateway)["held"] == n)  # type: ignore[misc]
            await asyncio.gather(*early)  # in flight: they run on, and end
            assert not any(t.done() for t in late) and gate(gateway)["held"] == 2
            await admin(http, gateway, "POST", "/resume", {})
        for client in clients:
            await client.close()
        answers = [t.result() for t in early + late]
        assert not [a for a in answers if isinstance(a, openai.APIStatusError)]
        logs = [await events(http, gateway, r["id"]) for r in rollouts]
    assert [len(of_kind(log, "model_response")) for log in logs] == [1, 1, 1, 1]
    assert all(of_kind(log, "model_error") == [] for log in logs)  # 0 harness errors


async def test_held_calls_go_out_in_arrival_order(http: aiohttp.ClientSession) -> None:
    """One call at a time reaches the engine (``max_inflight = 1``): the order the calls
    leave the gate is the order the engine gets them."""
    async with Simulator(SimConfig(seed=7, ttft_ms=300)) as sim, recording(sim.url) as (
        url, recorder,
    ):  # fmt: skip
        ep = EndpointConfig(base_url=url + "/v1", model="sim-model", max_inflight=1)
        async with gateway_over(ep) as gateway, asyncio.TaskGroup() as tasks:
            rollout = await register(http, gateway)
            async with openai_client(rollout) as client:  # answers: all 200, or a failure
                ask = client.chat.completions.create
                first = tasks.create_task(ask(model="m", messages=_ask("first")))
                await settle(lambda: gate(gateway)["in_flight"] == 1)
                await admin(http, gateway, "POST", "/pause", {"mode": "hold"})
                held = []
                for n, name in enumerate(("b", "c", "d", "e"), start=1):
                    held.append(tasks.create_task(ask(model="m", messages=_ask(name))))
                    await settle(lambda n=n: gate(gateway)["held"] == n)  # type: ignore[misc]
                await first
                await admin(http, gateway, "POST", "/resume", {})
                await asyncio.gather(*held)
    order = [r["body"]["messages"][-1]["content"] for r in recorder.requests]
    assert order == ["first", "b", "c", "d", "e"]


async def test_drain_answers_once_the_calls_in_flight_are_recorded(
    http: aiohttp.ClientSession,
) -> None:
    async with engines_and_gateway() as ([stand_in], gateway), asyncio.TaskGroup() as tasks:
        stand_in.release.clear()
        rollouts = [await register(http, gateway) for _ in range(2)]
        clients = [openai_client(r) for r in rollouts]
        calls = [tasks.create_task(c.chat.completions.create(model="m", messages=_ask("x")))
                 for c in clients]  # fmt: skip
        await settle(lambda: len(stand_in.chats) == 2)

        async def drain() -> list[int]:
            status, _ = await admin(http, gateway, "POST", "/pause", {"mode": "drain"})
            assert status == 200
            # what was recorded when the pause answered (no await in between)
            return answered_now(gateway, rollouts)

        pausing = tasks.create_task(drain())
        await settle(lambda: gate(gateway)["paused"] == "drain")
        assert not pausing.done() and gate(gateway)["in_flight"] == 2
        stand_in.release.set()
        assert await pausing == [1, 1]
        await asyncio.gather(*calls)
        for client in clients:
            await client.close()


async def test_drain_waits_for_a_call_queued_for_its_slot_too(
    http: aiohttp.ClientSession,
) -> None:
    """A call that passed the gate before the pause but waits for the endpoint's cap is in
    flight too: a drain that answered before it was sent would let it reach the engine
    while the trainer updates its weights."""
    endpoint = {"max_inflight": 1}
    async with engines_and_gateway(endpoint=endpoint) as ([stand_in], gateway), \
            asyncio.TaskGroup() as tasks:  # fmt: skip
        stand_in.release.clear()
        rollouts = [await register(http, gateway) for _ in range(2)]
        clients = [openai_client(r) for r in rollouts]
        calls = [tasks.create_task(c.chat.completions.create(model="m", messages=_ask("x")))
                 for c in clients]  # fmt: skip
        await settle(lambda: len(stand_in.chats) == 1
                     and gateway.snapshot()["inflight"]["default"]["waiting"] == 1)  # fmt: skip
        pausing = tasks.create_task(gateway.pause("drain"))
        await settle(lambda: gate(gateway)["paused"] == "drain")
        stand_in.release.set()
        await pausing
        assert answered_now(gateway, rollouts) == [1, 1] and len(stand_in.chats) == 2
        await asyncio.gather(*calls)
        for client in clients:
            await client.close()


async def test_abort_cuts_relayed_calls_in_flight(http: aiohttp.ClientSession) -> None:
    async with engines_and_gateway() as ([stand_in], gateway):
        stand_in.release.clear()  # never answers: only the cut ends the call
        await gateway.set_policy_version("step-4")
        rollout = await register(http, gateway)
        async with openai_client(rollout) as client:
            async with asyncio.TaskGroup() as tasks:
                call = tasks.create_task(
                    outcome(client.chat.completions.create(model="m", messages=_ask("x")))
                )
                await settle(lambda: len(stand_in.chats) == 1)
                status, doc = await admin(http, gateway, "POST", "/pause", {"mode": "abort"})
                assert (status, doc["cut"], doc["endpoints"]["default"]["cut"]) == (200, 1, 1)
            error = call.result()
            assert isinstance(error, openai.InternalServerError)
            assert (error.status_code, error.code) == (503, "upstream_aborted")
            assert gate(gateway)["in_flight"] == 0
            # nothing left to cut; once resumed, calls go through again
            assert (await gateway.pause("abort"))["cut"] == 0
            await gateway.resume()
            stand_in.release.set()
            await client.chat.completions.create(model="m", messages=_ask("y"))
        log = await events(http, gateway, rollout["id"])
    [recorded] = of_kind(log, "model_error")
    assert (recorded["code"], recorded["policy_version"]) == ("upstream_aborted", "step-4")
    assert gate(gateway)["cut"] == 1
    assert [r["policy_version"] for r in of_kind(log, "model_response")] == ["step-4"]


async def test_abort_cuts_a_relayed_stream_mid_way(http: aiohttp.ClientSession) -> None:
    """The harness has part of the answer: the cut reaches it in-band, in its dialect."""
    config = SimConfig(seed=7, tokens_per_s=20, completion_tokens=400)
    async with Simulator(config) as sim:
        ep = EndpointConfig(base_url=sim.base_url, model="sim-model")
        async with gateway_over(ep) as gateway:
            rollout = await register(http, gateway)
            async with openai_client(rollout) as client:
                stream = await client.chat.completions.create(
                    model="m", messages=_ask("x"), stream=True
                )
                chunks = aiter(stream)
                await anext(chunks)  # the answer has begun
                assert (await gateway.pause("abort"))["cut"] == 1
                with pytest.raises(openai.APIError) as info:
                    async for _ in chunks:
                        pass
            assert "abort pause cut" in info.value.message
            log = await events(http, gateway, rollout["id"])
    [error] = of_kind(log, "model_error")
    assert (error["code"], error["stream"]) == ("upstream_aborted", True)


async def test_a_call_held_past_pause_max_s_is_refused_503_paused(
    make_gateway: GatewayFactory, http: aiohttp.ClientSession
) -> None:
    gateway = await make_gateway(pause_max_s=0.05)
    await gateway.set_policy_version("step-9")
    await gateway.pause("hold")
    rollout = await register(http, gateway)
    async with openai_client(rollout) as client:  # max_retries=0: the SDK's first try
        with pytest.raises(openai.InternalServerError) as info:
            await client.chat.completions.create(model="m", messages=_ask("x"))
    assert (info.value.status_code, info.value.code) == (503, "paused")
    assert info.value.response.headers["Retry-After"] == "1"
    log = await events(http, gateway, rollout["id"])
    assert [e["kind"] for e in log] == ["model_request", "model_error"]
    request, error = (e["payload"] for e in log)
    assert request["sent"] is False  # held, then refused: never sent upstream
    assert (error["code"], error["policy_version"]) == ("paused", "step-9")
    assert (gate(gateway)["refused"], gate(gateway)["held"]) == (1, 0)


async def test_the_sdk_retries_a_call_refused_paused(
    make_gateway: GatewayFactory, http: aiohttp.ClientSession
) -> None:
    gateway = await make_gateway(pause_max_s=0.05)
    await gateway.pause("hold")
    rollout = await register(http, gateway)
    async with openai_client(rollout, max_retries=1) as client, asyncio.TaskGroup() as tasks:
        call = tasks.create_task(client.chat.completions.create(model="m", messages=_ask("x")))
        await settle(lambda: gate(gateway)["refused"] == 1)
        await gateway.resume()  # before the SDK's retry, which Retry-After puts off
        answer = await call
    assert answer.choices[0].message.content
    kinds = [e["kind"] for e in await events(http, gateway, rollout["id"])]
    assert kinds == ["model_request", "model_error", "model_request", "model_response"]


async def test_shutdown_while_paused_ends_the_held_calls(
    sim: Simulator, http: aiohttp.ClientSession
) -> None:
    ep = EndpointConfig(base_url=sim.base_url, model="sim-model")
    async with gateway_over(ep) as gateway, asyncio.TaskGroup() as tasks:
        await gateway.pause("hold")
        rollouts = [await register(http, gateway) for _ in range(3)]
        clients = [openai_client(r) for r in rollouts]
        calls = [
            tasks.create_task(outcome(c.chat.completions.create(model="m", messages=_ask("x"))))
            for c in clients
        ]
        await settle(lambda: gate(gateway)["held"] == 3)
        await gateway.aclose()
        assert gateway.drained  # every held call unwound, none waited out pause_max_s
        for call in calls:
            error = await call
            assert isinstance(error, openai.InternalServerError)
            assert error.code == "gateway_closed"
        for client in clients:
            await client.close()
    assert gate(gateway)["held"] == 0
