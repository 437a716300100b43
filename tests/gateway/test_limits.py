"""Per-rollout limits, sampling overrides and the per-endpoint in-flight cap."""

from __future__ import annotations

import asyncio
from typing import Any

import aiohttp
import openai
import pytest

from helpers import GatewayFactory, events, openai_client, register, settle
from rolltap.config import EndpointConfig, GatewaySettings
from rolltap.gateway import Gateway, RolloutLimits
from rolltap.sim import Simulator

HI: list[Any] = [{"role": "user", "content": "hi"}]


async def test_max_turns_ends_the_rollout_with_a_clean_error(
    gateway: Gateway, http: aiohttp.ClientSession
) -> None:
    rollout = await register(http, gateway, limits={"max_turns": 2})
    async with openai_client(rollout) as client:
        for _ in range(2):
            await client.chat.completions.create(model="m", messages=HI)
        with pytest.raises(openai.RateLimitError) as info:
            await client.chat.completions.create(model="m", messages=HI)
    assert info.value.code == "limit_reached"
    assert gateway.get(rollout["id"]).limit_reached == "max_turns"
    log = await events(http, gateway, rollout["id"])
    assert [e["kind"] for e in log][-2:] == ["model_request", "model_error"]
    # the refused call is recorded, and marked as never sent upstream
    assert [e["payload"].get("sent") for e in log if e["kind"] == "model_request"] == [
        None, None, False,
    ]  # fmt: skip


async def test_max_tokens_counts_the_upstream_usage(gateway: Gateway) -> None:
    rollout = await gateway.register(limits=RolloutLimits(max_tokens=1))
    info = gateway.describe(rollout)
    async with openai_client(info) as client:
        await client.chat.completions.create(model="m", messages=HI)
        with pytest.raises(openai.RateLimitError):
            await client.chat.completions.create(model="m", messages=HI)
    assert rollout.limit_reached == "max_tokens"
    assert rollout.total_tokens > 1


async def test_timeout_limit(gateway: Gateway) -> None:
    rollout = await gateway.register(limits=RolloutLimits(timeout_s=1e-9))
    async with openai_client(gateway.describe(rollout)) as client:
        with pytest.raises(openai.RateLimitError):
            await client.chat.completions.create(model="m", messages=HI)
    assert rollout.limit_reached == "timeout"


async def test_bad_limits_are_rejected_naming_the_field(
    gateway: Gateway, http: aiohttp.ClientSession
) -> None:
    from helpers import ADMIN_HEADERS

    for limits, field in [({"max_turns": 0}, "limits.max_turns"), ({"turns": 1}, "limits.turns")]:
        async with http.post(
            gateway.admin_url + "/rollouts", json={"limits": limits}, headers=ADMIN_HEADERS
        ) as resp:
            assert resp.status == 400
            assert (await resp.json())["error"]["param"] == field


async def test_sampling_overrides_what_the_harness_sends_and_is_recorded(
    gateway: Gateway, sim: Simulator, http: aiohttp.ClientSession
) -> None:
    rollout = await register(http, gateway, sampling={"temperature": 0.0, "max_tokens": 3})
    async with openai_client(rollout) as client:
        reply = await client.chat.completions.create(
            model="m", messages=HI, temperature=1.5, max_tokens=100
        )
    assert reply.usage is not None
    assert reply.usage.completion_tokens == 3
    assert sim.stats.last_request_body is not None
    assert sim.stats.last_request_body["temperature"] == 0.0
    request = (await events(http, gateway, rollout["id"]))[0]["payload"]
    assert {"field": "temperature", "from": 1.5, "to": 0.0} in request["rewrites"]
    assert {"field": "max_tokens", "from": 100, "to": 3} in request["rewrites"]


async def test_max_inflight_is_never_exceeded_and_waits_in_order(
    sim: Simulator, http: aiohttp.ClientSession
) -> None:
    endpoint = EndpointConfig(base_url=sim.base_url, model="sim-model", max_inflight=3)
    gate = sim.gate("slow")
    async with Gateway(endpoint, GatewaySettings(admin_token="t")) as gateway:
        rollouts = [gateway.describe(await gateway.register()) for _ in range(12)]

        async def call(rollout: dict[str, Any]) -> None:
            async with openai_client(rollout, default_headers={"x-sim-gate": "slow"}) as client:
                await client.chat.completions.create(model="m", messages=HI)

        async with asyncio.TaskGroup() as tg:
            for rollout in rollouts:
                tg.create_task(call(rollout))
            await gate.wait_reached()
            await sim.wait_for(lambda s: s.in_flight == 3)
            limiter = gateway.snapshot()["inflight"]["default"]
            assert limiter["in_flight"] == 3
            gate.open()
        assert sim.stats.peak_in_flight == 3
        assert sim.stats.completed == 12
        assert gateway.snapshot()["inflight"]["default"]["peak"] == 3


async def test_a_full_wait_queue_answers_upstream_busy(
    sim: Simulator, make_gateway: GatewayFactory
) -> None:
    endpoint = EndpointConfig(
        base_url=sim.base_url, model="sim-model", max_inflight=1, max_queued=1
    )
    gate = sim.gate("hold")
    async with Gateway(endpoint, GatewaySettings(admin_token="t")) as gateway:
        infos = [gateway.describe(await gateway.register()) for _ in range(3)]
        clients = [openai_client(i, default_headers={"x-sim-gate": "hold"}) for i in infos]
        async with asyncio.TaskGroup() as tg:
            first = tg.create_task(clients[0].chat.completions.create(model="m", messages=HI))
            await gate.wait_reached()
            second = tg.create_task(clients[1].chat.completions.create(model="m", messages=HI))
            await settle(lambda: gateway.snapshot()["inflight"]["default"]["waiting"] == 1)
            with pytest.raises(openai.RateLimitError) as info:
                await clients[2].chat.completions.create(model="m", messages=HI)
            gate.open()
        assert info.value.code == "upstream_busy"
        assert first.result().choices and second.result().choices
        for client in clients:
            await client.close()
