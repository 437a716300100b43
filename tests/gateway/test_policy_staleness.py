"""``max_staleness``: a rollout that began K or more policy versions ago gets no new calls
(``409 policy_stale``, marked stale); one that begins now is served. A call held through
an update goes out under the new version, and is judged by it."""

from __future__ import annotations

import asyncio
from typing import Any

import aiohttp
import openai
import pytest

from gateway.policykit import admin, gate, of_kind
from helpers import GatewayFactory, events, openai_client, register, settle
from rolltap.gateway import Gateway


def _ask(text: str) -> list[Any]:
    return [{"role": "user", "content": text}]


async def _call(rollout: dict[str, Any], text: str = "hi") -> str | None:
    async with openai_client(rollout) as client:
        answer = await client.chat.completions.create(model="m", messages=_ask(text))
    return answer.choices[0].message.content


async def _versions(http: aiohttp.ClientSession, gateway: Gateway, rollout_id: str) -> list[Any]:
    log = await events(http, gateway, rollout_id)
    return [r["policy_version"] for r in of_kind(log, "model_response")]


async def test_a_rollout_older_than_max_staleness_is_refused_and_marked_stale(
    make_gateway: GatewayFactory, http: aiohttp.ClientSession
) -> None:
    gateway = await make_gateway(max_staleness=1)
    old = await register(http, gateway)
    await _call(old)
    await admin(http, gateway, "POST", "/policy", {"version": "v1"})
    with pytest.raises(openai.ConflictError) as info:
        await _call(old)
    assert (info.value.status_code, info.value.code) == (409, "policy_stale")
    assert gateway.get(old["id"]).stale
    log = await events(http, gateway, old["id"])
    request, error = (e["payload"] for e in log[-2:])
    assert request["sent"] is False
    assert (error["code"], error["policy_version"]) == ("policy_stale", "v1")
    # a rollout that begins under the new version is served, call after call
    new = await register(http, gateway)
    await _call(new)
    await _call(new)
    assert not gateway.get(new["id"]).stale
    assert await _versions(http, gateway, new["id"]) == ["v1", "v1"]
    assert gate(gateway)["max_staleness"] == 1


async def test_max_staleness_counts_versions(
    make_gateway: GatewayFactory, http: aiohttp.ClientSession
) -> None:
    gateway = await make_gateway(max_staleness=2)
    rollout = await register(http, gateway)
    await _call(rollout)
    await gateway.set_policy_version("v1")
    await _call(rollout)  # one version behind: within 2
    await gateway.set_policy_version("v1")  # the same version: no new epoch
    await _call(rollout)
    await gateway.set_policy_version("v2")
    with pytest.raises(openai.ConflictError):
        await _call(rollout)
    assert await _versions(http, gateway, rollout["id"]) == [None, "v1", "v1"]


async def test_without_max_staleness_a_rollout_spans_versions(
    gateway: Gateway, http: aiohttp.ClientSession
) -> None:
    rollout = await register(http, gateway)
    for version in ("v1", "v2", "v3"):
        await gateway.set_policy_version(version)
        await _call(rollout)
    assert await _versions(http, gateway, rollout["id"]) == ["v1", "v2", "v3"]
    assert not gateway.get(rollout["id"]).stale


async def test_a_first_call_held_through_an_update_begins_under_the_new_version(
    make_gateway: GatewayFactory, http: aiohttp.ClientSession
) -> None:
    """The trainer pauses, updates, resumes: a rollout whose first call waited out the
    update began under the new weights, and is not stale on its next call."""
    gateway = await make_gateway(max_staleness=1)
    rollout = await register(http, gateway)
    await gateway.pause("hold")
    async with asyncio.TaskGroup() as tasks:
        first = tasks.create_task(_call(rollout, "first"))
        await settle(lambda: gate(gateway)["held"] == 1)
        await gateway.set_policy_version("v1")
        await gateway.resume()
    assert first.result()
    assert await _call(rollout, "second")
    assert not gateway.get(rollout["id"]).stale
    assert await _versions(http, gateway, rollout["id"]) == ["v1", "v1"]


async def test_a_later_call_held_through_an_update_is_judged_by_the_new_version(
    make_gateway: GatewayFactory, http: aiohttp.ClientSession
) -> None:
    gateway = await make_gateway(max_staleness=1)
    rollout = await register(http, gateway)
    await _call(rollout, "first")
    await gateway.pause("hold")
    async with asyncio.TaskGroup() as tasks:

        async def second() -> openai.ConflictError:
            with pytest.raises(openai.ConflictError) as info:
                await _call(rollout, "second")
            return info.value

        refused = tasks.create_task(second())
        await settle(lambda: gate(gateway)["held"] == 1)
        await gateway.set_policy_version("v1")
        await gateway.resume()
    assert refused.result().code == "policy_stale"
    assert gateway.get(rollout["id"]).stale
    assert await _versions(http, gateway, rollout["id"]) == [None]
