"""``forward_pause``: a pause and a resume of the gateway reach the engine too, in the
engine's own API (vLLM's ``/pause?mode=…`` and ``/resume``, SGLang's
``/pause_generation`` and ``/continue_generation``), once per engine; an engine that does
not take a pause leaves neither the gateway nor any engine paused."""

from __future__ import annotations

import asyncio
from typing import Any

import aiohttp
import pytest

from gateway.policykit import admin, engine, engines_and_gateway, gate, gateway_over
from helpers import openai_client, register, settle
from rolltap.config import EndpointConfig

HI: list[Any] = [{"role": "user", "content": "hi"}]

VLLM = {"hold": "keep", "drain": "wait", "abort": "abort"}
SGLANG = {"hold": "in_place", "drain": "in_place", "abort": "abort"}


@pytest.mark.parametrize("mode", ["hold", "drain", "abort"])
async def test_vllm_gets_pause_with_its_mode_then_resume_once(
    http: aiohttp.ClientSession, mode: str
) -> None:
    async with engines_and_gateway(endpoint={"forward_pause": "vllm"}) as ([vllm], gateway):
        status, _ = await admin(http, gateway, "POST", "/pause", {"mode": mode})
        assert status == 200 and gate(gateway)["paused"] == mode
        assert vllm.control() == [("POST", "/pause", {"mode": VLLM[mode]}, None)]
        await admin(http, gateway, "POST", "/resume", {})
        await admin(http, gateway, "POST", "/resume", {})  # not paused: nothing to forward
        assert vllm.control()[1:] == [("POST", "/resume", {}, None)]
        assert gate(gateway)["paused"] is None


@pytest.mark.parametrize("mode", ["hold", "drain", "abort"])
async def test_sglang_gets_pause_generation_then_continue_generation_once(
    http: aiohttp.ClientSession, mode: str
) -> None:
    async with engines_and_gateway(endpoint={"forward_pause": "sglang"}) as ([sgl], gateway):
        await gateway.pause(mode)  # type: ignore[arg-type]
        await gateway.resume()
        assert sgl.control() == [
            ("POST", "/pause_generation", {}, {"mode": SGLANG[mode]}),
            ("POST", "/continue_generation", {}, None),
        ]


async def test_a_forwarded_abort_is_the_engines_to_make(http: aiohttp.ClientSession) -> None:
    """The gateway cuts nothing itself: the engine answers what it aborts (the token
    client continues those answers)."""
    async with engines_and_gateway(endpoint={"forward_pause": "vllm"}) as ([vllm], gateway):
        vllm.release.clear()
        rollout = await register(http, gateway)
        async with openai_client(rollout) as client, asyncio.TaskGroup() as tasks:
            call = tasks.create_task(client.chat.completions.create(model="m", messages=HI))
            await settle(lambda: len(vllm.chats) == 1)
            status, doc = await admin(http, gateway, "POST", "/pause", {"mode": "abort"})
            assert (status, doc["cut"], doc["endpoints"]["default"]["in_flight"]) == (200, 0, 1)
            vllm.release.set()  # the engine answers the request it aborted
            assert (await call).choices[0].message.content
        assert gate(gateway)["cut"] == 0
        assert vllm.control() == [("POST", "/pause", {"mode": "abort"}, None)]


async def test_a_resume_during_a_drain_keeps_the_engine_from_pausing_after_it(
    http: aiohttp.ClientSession,
) -> None:
    async with engines_and_gateway(endpoint={"forward_pause": "vllm"}) as ([vllm], gateway):
        vllm.release.clear()
        rollout = await register(http, gateway)
        async with openai_client(rollout) as client, asyncio.TaskGroup() as tasks:
            call = tasks.create_task(client.chat.completions.create(model="m", messages=HI))
            await settle(lambda: len(vllm.chats) == 1)
            draining = tasks.create_task(gateway.pause("drain"))
            await settle(lambda: gate(gateway)["paused"] == "drain")
            await gateway.resume()  # the trainer gave up waiting
            vllm.release.set()
            await call
            assert (await draining)["endpoints"]["default"]["paused"] is None
        assert [path for _, path, _, _ in vllm.control()] == ["/resume"]


async def test_an_engine_that_refuses_the_pause_leaves_nothing_paused(
    http: aiohttp.ClientSession,
) -> None:
    async with engines_and_gateway(endpoint={"forward_pause": "vllm"}) as ([vllm], gateway):
        vllm.statuses["/pause"] = 500
        status, body = await admin(http, gateway, "POST", "/pause", {"mode": "hold"})
        assert (status, body["error"]["code"]) == (502, "forward_pause_failed")
        assert "HTTP 500" in body["error"]["message"]
        assert gate(gateway)["paused"] is None
        rollout = await register(http, gateway)  # calls are not held
        async with openai_client(rollout) as client:
            await client.chat.completions.create(model="m", messages=HI)
        # a pause the gateway held already stays as it was
        del vllm.statuses["/pause"]
        await gateway.pause("hold")
        vllm.statuses["/pause"] = 500
        status, _ = await admin(http, gateway, "POST", "/pause", {"mode": "abort"})
        assert (status, gate(gateway)["paused"]) == (502, "hold")


async def test_an_engine_that_refuses_the_resume_keeps_the_gateway_paused(
    http: aiohttp.ClientSession,
) -> None:
    """The engine is still paused: the trainer retries the resume, which forwards again."""
    async with engines_and_gateway(endpoint={"forward_pause": "sglang"}) as ([sgl], gateway):
        await gateway.pause("hold")
        sgl.statuses["/continue_generation"] = 503
        status, body = await admin(http, gateway, "POST", "/resume", {})
        assert (status, body["error"]["code"]) == (502, "forward_pause_failed")
        assert gate(gateway)["paused"] == "hold"
        del sgl.statuses["/continue_generation"]
        assert (await admin(http, gateway, "POST", "/resume", {}))[0] == 200
        assert gate(gateway)["paused"] is None
        assert [path for _, path, _, _ in sgl.control()].count("/continue_generation") == 2


async def test_an_unreachable_engine_fails_the_pause_502(http: aiohttp.ClientSession) -> None:
    async with engine() as gone:
        url = gone.url
    ep = EndpointConfig(base_url=url + "/v1", model="m", forward_pause="vllm")
    async with gateway_over(ep) as gateway:
        status, body = await admin(http, gateway, "POST", "/pause", {"mode": "hold"})
        assert (status, body["error"]["code"]) == (502, "forward_pause_failed")
        assert gate(gateway)["paused"] is None


async def test_each_replica_gets_the_pause_and_the_resume_once(
    http: aiohttp.ClientSession,
) -> None:
    endpoint = {"forward_pause": "vllm"}
    async with engines_and_gateway(2, endpoint=endpoint) as (replicas, gateway):
        await admin(http, gateway, "POST", "/pause", {"mode": "drain"})
        await admin(http, gateway, "POST", "/resume", {})
        for replica in replicas:
            assert replica.control() == [
                ("POST", "/pause", {"mode": "wait"}, None), ("POST", "/resume", {}, None),
            ]  # fmt: skip


async def test_a_replica_that_refuses_undoes_the_others_pause(
    http: aiohttp.ClientSession,
) -> None:
    endpoint = {"forward_pause": "vllm"}
    async with engines_and_gateway(2, endpoint=endpoint) as ([first, second], gateway):
        second.statuses["/pause"] = 500
        status, _ = await admin(http, gateway, "POST", "/pause", {"mode": "hold"})
        assert status == 502 and gate(gateway)["paused"] is None
        assert first.control() == [
            ("POST", "/pause", {"mode": "keep"}, None), ("POST", "/resume", {}, None),
        ]  # fmt: skip
        assert second.control() == [("POST", "/pause", {"mode": "keep"}, None)]


async def test_a_pause_of_every_endpoint_is_undone_whole(http: aiohttp.ClientSession) -> None:
    async with engine() as good, engine() as bad:
        bad.statuses["/pause_generation"] = 500
        eps = [
            EndpointConfig(name="a", base_url=good.url + "/v1", model="m", forward_pause="vllm"),
            EndpointConfig(name="b", base_url=bad.url + "/v1", model="m", forward_pause="sglang"),
            EndpointConfig(name="c", base_url=good.url + "/v1", model="m"),
        ]
        async with gateway_over(eps) as gateway:
            status, _ = await admin(http, gateway, "POST", "/pause", {"mode": "hold"})
            assert status == 502
            assert {n: g["paused"] for n, g in gateway.policy()["endpoints"].items()} == {
                "a": None, "b": None, "c": None,
            }  # fmt: skip
            assert good.control() == [
                ("POST", "/pause", {"mode": "keep"}, None), ("POST", "/resume", {}, None),
            ]  # fmt: skip
            # one endpoint alone: the others are not asked
            assert (await admin(http, gateway, "POST", "/pause",
                                {"mode": "hold", "endpoint": "c"}))[0] == 200  # fmt: skip
            assert len(good.control()) == 2 and len(bad.control()) == 1
