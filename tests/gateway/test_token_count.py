"""``count_tokens`` calls through the official Anthropic SDK leave a ``token_count`` event."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import aiohttp
import anthropic
import pytest
from anthropic.types import MessageParam

from helpers import ADMIN_HEADERS, ADMIN_TOKEN, GatewayFactory, events, register
from rolltap.config import EndpointConfig, GatewaySettings
from rolltap.config.endpoint import Dialect
from rolltap.gateway import Gateway
from rolltap.rollouts.recorder import StoreRecorder
from rolltap.sim import Simulator
from rolltap.store import Store

QUESTION: MessageParam = {"role": "user", "content": "how many tokens is this"}


def _claude(rollout: dict[str, Any], **kwargs: Any) -> anthropic.AsyncAnthropic:
    return anthropic.AsyncAnthropic(
        base_url=rollout["anthropic_base_url"], api_key=rollout["api_key"], max_retries=0,
        **kwargs,
    )  # fmt: skip


def _counts(evs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [e["payload"] for e in evs if e["kind"] == "token_count"]


@pytest.mark.parametrize("upstream", ["messages", "chat"])
async def test_a_count_is_one_event_with_its_answer(
    upstream: Dialect, make_gateway: GatewayFactory, http: aiohttp.ClientSession
) -> None:
    gateway = await make_gateway(dialect=upstream)
    rollout = await register(http, gateway)
    async with _claude(rollout) as claude:
        count = await claude.messages.count_tokens(
            model="m", system="be brief", messages=[QUESTION]
        )
    evs = await events(http, gateway, rollout["id"])
    assert [e["kind"] for e in evs] == ["token_count"]
    payload = evs[0]["payload"]
    counted = upstream == "messages"
    assert payload["input_tokens"] == count.input_tokens > 0
    assert payload["source"] == ("upstream" if counted else "estimate")
    assert (payload["route"], payload["dialect"]) == ("messages.count_tokens", "messages")
    assert (payload["upstream_dialect"], payload["status"]) == (upstream, 200)
    assert payload["messages"] == [QUESTION]
    assert (payload["prefix_messages"], payload["prefix_digest"]) == (0, None)
    assert payload["params"] == {"model": "m", "system": "be brief"}
    sent = [{"field": "model", "from": "m", "to": "sim-model"}] if counted else []
    assert payload["rewrites"] == sent
    assert payload["intercept_id"].startswith(rollout["id"] + ".")
    assert payload["timing"]["total_ms"] >= 0
    assert ("ttfb_ms" in payload["timing"]) is counted
    assert gateway.snapshot()["intercepts"] == 0


async def test_a_count_stores_only_new_messages_and_is_not_a_turn(
    make_gateway: GatewayFactory, http: aiohttp.ClientSession
) -> None:
    """The count's messages are those past the last model request's conversation; later
    requests are stored as if no count had happened, and a count uses no turn."""
    gateway = await make_gateway(dialect="chat")
    rollout = await register(http, gateway, limits={"max_turns": 2})
    first: list[MessageParam] = [QUESTION]
    async with _claude(rollout) as claude:
        reply = await claude.messages.create(model="m", max_tokens=8, messages=first)
        said = reply.content[0]
        assert isinstance(said, anthropic.types.TextBlock)
        longer: list[MessageParam] = [*first, {"role": "assistant", "content": said.text},
                  {"role": "user", "content": "and now?"}]  # fmt: skip
        for _ in range(3):
            await claude.messages.count_tokens(model="m", messages=longer)
        await claude.messages.create(model="m", max_tokens=8, messages=longer)
    evs = await events(http, gateway, rollout["id"])
    counts = _counts(evs)
    assert len(counts) == 3
    for payload in counts:
        assert payload["prefix_messages"] == 1
        assert payload["messages"] == longer[1:]
    requests = [e["payload"] for e in evs if e["kind"] == "model_request"]
    assert [r["prefix_messages"] for r in requests] == [0, 1]
    assert requests[1]["messages"] == longer[1:]
    assert [e["kind"] for e in evs].count("model_response") == 2  # max_turns 2 not reached


async def test_an_upstream_error_is_recorded_and_passed_through(
    make_gateway: GatewayFactory, http: aiohttp.ClientSession
) -> None:
    gateway = await make_gateway(dialect="messages")
    rollout = await register(http, gateway)
    async with _claude(rollout, default_headers={"x-sim-fault": "status=500"}) as claude:
        with pytest.raises(anthropic.InternalServerError):
            await claude.messages.count_tokens(model="m", messages=[QUESTION])
    [payload] = _counts(await events(http, gateway, rollout["id"]))
    assert (payload["status"], payload["input_tokens"]) == (500, None)
    assert "simulated fault: HTTP 500" in payload["upstream_body"]


async def test_unregister_unblocks_a_pending_count(
    make_gateway: GatewayFactory, sim: Simulator, http: aiohttp.ClientSession
) -> None:
    gateway = await make_gateway(dialect="messages")
    gate = sim.gate("held")
    rollout = await register(http, gateway)
    async with _claude(rollout, default_headers={"x-sim-gate": "held"}) as claude:
        task = asyncio.ensure_future(claude.messages.count_tokens(model="m", messages=[QUESTION]))
        try:
            await gate.wait_reached()
            async with http.delete(
                f"{gateway.admin_url}/rollouts/{rollout['id']}", headers=ADMIN_HEADERS
            ) as resp:
                assert resp.status == 200
                body = await resp.json()
            with pytest.raises(anthropic.APIStatusError) as info:
                await task
        finally:
            task.cancel()
    assert info.value.status_code == 409
    assert body["events"] == 1
    await sim.wait_for(lambda s: s.disconnected == 1)  # the upstream count was cancelled
    assert gateway.pool.snapshot().leases == 0


async def test_a_count_is_persisted(
    sim: Simulator, http: aiohttp.ClientSession, tmp_path: Path
) -> None:
    endpoint = EndpointConfig(base_url=sim.base_url, model="sim-model")
    async with await Store.open(f"sqlite:///{tmp_path / 'gw.db'}") as store:
        run = await store.create_run("standalone")
        async with (
            StoreRecorder(store, run.id) as recorder,
            Gateway(endpoint, GatewaySettings(admin_token=ADMIN_TOKEN), observers=[recorder]) as gw,
        ):
            rollout = await register(http, gw)
            async with _claude(rollout) as claude:
                count = await claude.messages.count_tokens(model="m", messages=[QUESTION])
            await gw.unregister(rollout["id"])
        stored = await store.events(rollout["id"])
    assert [e.kind for e in stored] == ["token_count"]
    assert stored[0].payload["input_tokens"] == count.input_tokens
    assert stored[0].payload["source"] == "estimate"
