"""Rollouts pinned to inference replicas: three simulators behind one gateway endpoint.

The simulators count requests per ``X-Rolltap-Rollout``, ``X-Session-ID`` and
``X-SMG-Routing-Key`` value (``SimStats.requests_by_*``), which is how these tests see
where each rollout's calls went.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack
from typing import Any
from urllib.parse import urlsplit

import aiohttp
import openai
import pytest

from helpers import ADMIN_HEADERS, ADMIN_TOKEN, events, openai_client, register, settle
from rolltap.clients.fake import FakeUpstream
from rolltap.clients.kinds import move_upstream
from rolltap.clients.relay import RelayClient
from rolltap.config import EndpointConfig, GatewaySettings, Timeouts
from rolltap.errors import ConfigError
from rolltap.gateway import Gateway
from rolltap.sim import SimConfig, Simulator

pytestmark = pytest.mark.timeout(60)


class Clock:
    """The gateway's replica clock: tests move it past a cool-off instead of waiting. It
    ticks a millisecond per reading, so every call takes some time."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        self.now += 0.001
        return self.now


@pytest.fixture
async def sims() -> AsyncIterator[list[Simulator]]:
    async with AsyncExitStack() as stack:
        yield [await stack.enter_async_context(Simulator(SimConfig(seed=i))) for i in range(3)]


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
async def gateway(sims: list[Simulator], clock: Clock) -> AsyncIterator[Gateway]:
    endpoint = EndpointConfig(
        replicas=[sim.base_url for sim in sims], model="sim-model", replica_cooloff_s=30
    )
    async with Gateway(
        endpoint, GatewaySettings(admin_token=ADMIN_TOKEN), replica_clock=clock
    ) as gateway:
        yield gateway


async def turn(rollout: dict[str, Any], history: list[dict[str, Any]], text: str) -> None:
    """One turn of a multi-turn rollout: the history grows by the question and answer."""
    history.append({"role": "user", "content": text})
    async with openai_client(rollout) as client:
        answer = await client.chat.completions.create(model="m", messages=history)  # type: ignore[arg-type]
    history.append({"role": "assistant", "content": answer.choices[0].message.content})


def where(sims: list[Simulator], rollout_id: str) -> dict[int, int]:
    """Which simulators served ``rollout_id``, and how many requests each."""
    counts = {i: sim.stats.requests_by_rollout.get(rollout_id, 0) for i, sim in enumerate(sims)}
    return {i: n for i, n in counts.items() if n}


def replica_of(sims: list[Simulator], rollout_id: str) -> int:
    served = where(sims, rollout_id)
    assert len(served) == 1, served
    return next(iter(served))


def waiting(gateway: Gateway) -> int:
    """Calls waiting for a slot on the first replica."""
    count: int = gateway.snapshot()["replicas"]["default"]["replicas"][0]["waiting"]
    return count


async def admin_get(http: aiohttp.ClientSession, gateway: Gateway, path: str) -> Any:
    async with http.get(gateway.admin_url + path, headers=ADMIN_HEADERS) as resp:
        assert resp.status == 200, await resp.text()
        return await (resp.json() if path == "/stats" else resp.text())


async def test_thirty_rollouts_spread_and_each_stays_on_its_replica(
    sims: list[Simulator], gateway: Gateway, http: aiohttp.ClientSession
) -> None:
    rollouts = [await register(http, gateway) for _ in range(30)]
    histories: list[list[dict[str, Any]]] = [[] for _ in rollouts]
    for n in range(3):
        async with asyncio.TaskGroup() as tasks:
            for rollout, history in zip(rollouts, histories, strict=True):
                tasks.create_task(turn(rollout, history, f"turn {n}"))
    on = [replica_of(sims, r["id"]) for r in rollouts]
    assert sorted(on.count(i) for i in range(3)) == [10, 10, 10]
    for rollout, i in zip(rollouts, on, strict=True):
        rid, stats = rollout["id"], sims[i].stats
        assert stats.requests_by_rollout[rid] == 3
        assert stats.requests_by_session[rid] == 3  # a router in front could pin on it
        assert stats.requests_by_routing_key[rid] == 3
        requests = [
            e["payload"] for e in await events(http, gateway, rid) if e["kind"] == "model_request"
        ]
        assert [p["replica"] for p in requests] == [sims[i].base_url] * 3
    snap = await admin_get(http, gateway, "/stats")
    replicas = snap["replicas"]["default"]["replicas"]
    assert [r["pinned_rollouts"] for r in replicas] == [on.count(i) for i in range(3)]
    assert [r["calls"] for r in replicas] == [3 * on.count(i) for i in range(3)]
    assert all(r["errors"] == 0 and r["up"] and r["latency_sum_s"] > 0 for r in replicas)
    metrics = await admin_get(http, gateway, "/metrics")
    line = f'rolltap_replica_calls_total{{endpoint="default",replica="{sims[0].base_url}"}}'
    assert f"{line} {3 * on.count(0)}.0" in metrics
    pinned = f'rolltap_replica_pinned_rollouts{{endpoint="default",replica="{sims[1].base_url}"}}'
    assert f"{pinned} {on.count(1)}.0" in metrics


async def test_a_killed_replica_fails_one_call_then_its_rollouts_move_and_it_comes_back(
    sims: list[Simulator], gateway: Gateway, http: aiohttp.ClientSession, clock: Clock
) -> None:
    rollouts = [await register(http, gateway) for _ in range(6)]
    histories: list[list[dict[str, Any]]] = [[] for _ in rollouts]
    for rollout, history in zip(rollouts, histories, strict=True):
        await turn(rollout, history, "first")
    on = [replica_of(sims, r["id"]) for r in rollouts]
    assert sorted(on) == [0, 0, 1, 1, 2, 2]
    killed = on[0]
    first, second = [i for i, r in enumerate(on) if r == killed]
    port = urlsplit(sims[killed].url).port
    assert port is not None
    await sims[killed].aclose()

    # the first call to the dead replica fails to the harness: no retry anywhere
    served_before = where(sims, rollouts[first]["id"])
    with pytest.raises(openai.APIStatusError) as failed:
        await turn(rollouts[first], histories[first], "second")
    assert failed.value.status_code == 502
    assert where(sims, rollouts[first]["id"]) == served_before  # one attempt, on the dead one
    histories[first].pop()  # the harness retries the turn itself
    snap = (await admin_get(http, gateway, "/stats"))["replicas"]["default"]
    dead = snap["replicas"][killed]
    assert (dead["up"], dead["down_reason"], dead["errors"]) == (False, "connect_refused", 1)

    # ... its retry is served by another replica, the move noted
    await turn(rollouts[first], histories[first], "second")
    rid = rollouts[first]["id"]
    moved_to = [i for i in where(sims, rid) if i != killed]
    assert len(moved_to) == 1 and where(sims, rid)[moved_to[0]] == 1
    log = await events(http, gateway, rid)
    kinds = [e["kind"] for e in log]
    assert kinds[-5:] == ["model_request", "model_error", "note", "model_request", "model_response"]
    assert log[-5]["payload"]["replica"] == sims[killed].base_url
    assert log[-4]["payload"]["code"] == "upstream_unreachable"
    assert log[-3]["payload"] == {
        "text": "repinned",
        "data": {
            "from": sims[killed].base_url,
            "to": sims[moved_to[0]].base_url,
            "reason": "connect_refused",
        },
    }
    assert log[-2]["payload"]["replica"] == sims[moved_to[0]].base_url

    # the other rollout pinned there moves at its next call, which does not fail
    await turn(rollouts[second], histories[second], "second")
    other = await events(http, gateway, rollouts[second]["id"])
    assert [e["kind"] for e in other][-3:] == ["note", "model_request", "model_response"]
    assert other[-3]["payload"]["data"]["from"] == sims[killed].base_url

    # brought back on its port, and past its cool-off: new rollouts go there again
    async with Simulator(SimConfig(seed=9), port=port) as back:
        clock.now += 31
        fresh = await register(http, gateway)
        await turn(fresh, [], "hello")
        assert back.stats.requests_by_rollout == {fresh["id"]: 1}
        snap = (await admin_get(http, gateway, "/stats"))["replicas"]["default"]
        assert snap["repins"] == 2
        assert snap["replicas"][killed]["up"] is True
        assert snap["replicas"][killed]["pinned_rollouts"] == 1


#: short, yet long enough to open a loopback connection on a busy machine (1 ms was not)
_CONNECT_S = 0.05


async def test_a_call_over_a_replicas_connections_queues_and_does_not_mark_it_down(
    sims: list[Simulator], http: aiohttp.ClientSession
) -> None:
    """aiohttp's connect timeout also counts waiting for a pooled connection; a replica
    whose connections are all busy must not look down. The call over the limit waits in
    the replica's own queue instead (``waiting``), and both calls are answered."""
    endpoint = EndpointConfig(
        replicas=[sims[0].base_url, sims[1].base_url], model="sim-model", max_connections=1,
        timeouts=Timeouts(connect=_CONNECT_S),
    )  # fmt: skip
    gate = sims[0].gate("hold")
    settings = GatewaySettings(admin_token=ADMIN_TOKEN)
    async with Gateway(endpoint, settings) as gateway:
        first, _, third = [await register(http, gateway) for _ in range(3)]  # A, B, A
        held = [{"role": "user", "content": "held"}]
        hold = openai_client(first, default_headers={"x-sim-gate": "hold"})
        async with hold as client, asyncio.TaskGroup() as tasks:
            tasks.create_task(client.chat.completions.create(model="m", messages=held))  # type: ignore[arg-type]
            await gate.wait_reached()  # the first call holds A's one connection
            queued = tasks.create_task(turn(third, [], "queued"))
            await settle(lambda: waiting(gateway) == 1)
            # the queued call must outwait the connect timeout: counted, it would fail
            await asyncio.sleep(2 * _CONNECT_S)
            gate.open()
            await queued
        replicas = gateway.snapshot()["replicas"]["default"]["replicas"]
    assert (replicas[0]["up"], replicas[0]["errors"], replicas[0]["calls"]) == (True, 0, 2)
    assert sims[0].stats.requests_by_rollout == {first["id"]: 1, third["id"]: 1}


def test_only_a_relay_or_token_upstream_can_move_to_another_replica() -> None:
    fake = FakeUpstream("chat", [])
    client = RelayClient(EndpointConfig(base_url="http://127.0.0.1:9/v1", model="m"), None)
    with pytest.raises(ConfigError, match="cannot move to another replica"):
        move_upstream(fake, client)
