"""``max_staleness``: a rollout that began K or more policy versions ago gets no new calls
(``409 policy_stale``, marked stale); one that begins now is served. A call held through
an update goes out under the new version, and is judged by it. With
``rollouts_per_version`` too, new rollouts wait until the trainer is within K versions."""

from __future__ import annotations

import asyncio
from typing import Any

import aiohttp
import openai
import pytest

from gateway.policykit import admin, gate, of_kind
from helpers import GatewayFactory, events, openai_client, register, settle
from rolltap.config import GatewaySettings
from rolltap.errors import ConfigError
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


async def test_new_rollouts_wait_until_the_trainer_is_within_k_versions(
    make_gateway: GatewayFactory, http: aiohttp.ClientSession
) -> None:
    """``rollouts_per_version = 2`` with ``max_staleness = 1`` (synchronous RL): two
    rollouts begin under a version; a third waits at the gate, however long, until the
    trainer publishes the next one, and then begins under it. Calls of rollouts that
    began already are not held."""
    gateway = await make_gateway(max_staleness=1, rollouts_per_version=2)
    await gateway.set_policy_version("v0")
    first, second, third = [await register(http, gateway) for _ in range(3)]
    await _call(first)
    await _call(second)
    assert (gate(gateway)["began"], gate(gateway)["rollouts_per_version"]) == (2, 2)
    async with asyncio.TaskGroup() as tasks:
        waiting = tasks.create_task(_call(third, "third"))
        await settle(lambda: gate(gateway)["held_ahead"] == 1)
        await _call(first, "again")  # began already: served while the third waits
        assert not waiting.done()
        assert gate(gateway)["began"] == 2
        await gateway.set_policy_version("v1")
    assert waiting.result()
    assert (gate(gateway)["began"], gate(gateway)["held_ahead"]) == (3, 0)
    assert await _versions(http, gateway, third["id"]) == ["v1"]
    assert await _versions(http, gateway, first["id"]) == ["v0", "v0"]


async def test_a_new_rollout_ahead_past_pause_max_s_is_refused_503_paused(
    make_gateway: GatewayFactory, http: aiohttp.ClientSession
) -> None:
    gateway = await make_gateway(max_staleness=2, rollouts_per_version=1, pause_max_s=0.05)
    for _ in range(2):  # K × B = 2 may begin before the trainer publishes a version
        await _call(await register(http, gateway))
    late = await register(http, gateway)
    with pytest.raises(openai.InternalServerError) as info:
        await _call(late)
    assert (info.value.status_code, info.value.code) == (503, "paused")
    assert "rollouts_per_version = 1" in info.value.message
    log = await events(http, gateway, late["id"])
    assert [e["kind"] for e in log] == ["model_request", "model_error"]
    assert log[0]["payload"]["sent"] is False
    assert (gate(gateway)["began"], gate(gateway)["refused"]) == (2, 1)
    await gateway.set_policy_version("v1")  # room for one more: it begins now
    assert await _call(late)
    assert gate(gateway)["began"] == 3


def test_rollouts_per_version_needs_max_staleness() -> None:
    with pytest.raises(ConfigError, match="rollouts_per_version needs max_staleness"):
        GatewaySettings.from_env({"ROLLTAP_ROLLOUTS_PER_VERSION": "8"})
    settings = GatewaySettings.from_env({"ROLLTAP_ROLLOUTS_PER_VERSION": "8"}, max_staleness=2)
    assert (settings.rollouts_per_version, settings.max_staleness) == (8, 2)
