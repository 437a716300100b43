"""`rolltap gateway --store`: every rollout's events are committed as calls finish."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import aiohttp

from helpers import ADMIN_TOKEN, events, openai_client, register
from rolltap.config import EndpointConfig, GatewaySettings
from rolltap.gateway import Gateway
from rolltap.rollouts.recorder import StoreRecorder
from rolltap.sim import Simulator
from rolltap.store import Store


async def test_rollouts_are_persisted_incrementally_with_their_status(
    sim: Simulator, http: aiohttp.ClientSession, tmp_path: Path
) -> None:
    async with await Store.open(f"sqlite:///{tmp_path / 'gw.db'}") as store:
        run = await store.create_run("standalone")
        async with _recorded(sim, store, run.id) as (recorder, gateway):
            done = await register(http, gateway, user="ana", metadata={"task": "t1"})
            aborted = await register(http, gateway)
            async with openai_client(done) as client:
                for turn in range(3):
                    await client.chat.completions.create(
                        model="m", messages=[{"role": "user", "content": f"q{turn}"}]
                    )
            # persisted while the rollout is still live, before it ends
            await _until_persisted(store, done["id"], 6)
            live = await events(http, gateway, done["id"])
            await gateway.unregister(done["id"])
            await gateway.abort(aborted["id"])
        stored = await store.events(done["id"])
        assert [e.to_dict() for e in stored] == live
        session = await store.get_session(done["id"])
        assert (session.status, session.user, session.n_events) == ("completed", "ana", 6)
        assert session.task["metadata"] == {"task": "t1"}
        assert (await store.get_session(aborted["id"])).status == "cancelled"
        assert recorder.failures == 0


async def test_a_long_history_leaves_memory_once_durable_and_reads_back_whole(
    sim: Simulator, http: aiohttp.ClientSession, tmp_path: Path
) -> None:
    """``rolltap gateway --store``: a rollout over the recorder's bound keeps its durable
    request events without their messages; the admin API's events are read back whole."""
    async with await Store.open(f"sqlite:///{tmp_path / 'gw.db'}") as store:
        run = await store.create_run("standalone")
        async with _recorded(sim, store, run.id, release_over=1) as (recorder, gateway):
            rollout = await register(http, gateway)
            history: list[Any] = []
            async with openai_client(rollout) as client:
                for turn in range(3):
                    history.append({"role": "user", "content": f"q{turn}"})
                    answer = await client.chat.completions.create(model="m", messages=history)
                    history.append(
                        {"role": "assistant", "content": answer.choices[0].message.content}
                    )
            await _until_persisted(store, rollout["id"], 6)
            log = gateway.get(rollout["id"]).log
            for _ in range(500):  # released by the commit's task once it is durable
                if log.released == 6:
                    break
                await asyncio.sleep(0.01)
            in_memory = [e.payload for e in log if e.kind == "model_request"]
            live = await events(http, gateway, rollout["id"])
            since = await events(http, gateway, rollout["id"], since=4)
            await gateway.unregister(rollout["id"])
        stored = [e.to_dict() for e in await store.events(rollout["id"])]
    assert log.released == 6
    assert all(p.get("released") is True and "messages" not in p for p in in_memory)
    assert live == stored and since == stored[4:]
    assert [
        m["content"]
        for e in live
        if e["kind"] == "model_request"
        for m in e["payload"]["messages"]
        if m["role"] == "user"
    ] == ["q0", "q1", "q2"]
    assert recorder.failures == 0


@asynccontextmanager
async def _recorded(
    sim: Simulator, store: Store, run_id: str, **options: Any
) -> AsyncIterator[tuple[StoreRecorder, Gateway]]:
    """A gateway in front of ``sim`` whose rollouts are sessions of ``run_id``
    (``options``: the recorder's)."""
    endpoint = EndpointConfig(base_url=sim.base_url, model="sim-model")
    async with (
        StoreRecorder(store, run_id, reader=store, **options) as recorder,
        Gateway(endpoint, GatewaySettings(admin_token=ADMIN_TOKEN), observers=[recorder]) as gw,
    ):
        yield recorder, gw


async def _until_persisted(store: Store, session_id: str, n: int) -> None:
    # Commits run on the recorder's tasks; wait for them through the store itself.
    for _ in range(500):
        if len(await store.events(session_id)) >= n:
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"session {session_id} never reached {n} persisted events")


async def test_a_rollout_named_by_its_metadata_records_to_that_session(
    sim: Simulator, http: aiohttp.ClientSession, tmp_path: Path
) -> None:
    """The session id a harness gives is the one created *and* committed to."""
    async with await Store.open(f"sqlite:///{tmp_path / 'gw.db'}") as store:
        run = await store.create_run("standalone")
        async with _recorded(sim, store, run.id) as (recorder, gateway):
            mine = await register(http, gateway, metadata={"session_id": "mine"})
            async with openai_client(mine) as client:
                for turn in range(2):
                    await client.chat.completions.create(
                        model="m", messages=[{"role": "user", "content": f"q{turn}"}]
                    )
            live = await events(http, gateway, mine["id"])
            await gateway.unregister(mine["id"])
        session = await store.get_session("mine")
        assert (session.status, session.n_events, session.run_id) == ("completed", 4, run.id)
        assert [e.to_dict() for e in await store.events("mine")] == live
        assert [s.id for s in await store.list_sessions(run.id)] == ["mine"]
        assert recorder.failures == 0


async def test_a_session_id_taken_is_409_session_exists(
    sim: Simulator, http: aiohttp.ClientSession, tmp_path: Path
) -> None:
    async with await Store.open(f"sqlite:///{tmp_path / 'gw.db'}") as store:
        earlier = await store.create_run("earlier")
        await store.create_session(earlier.id, session_id="stored")
        run = await store.create_run("standalone")
        async with _recorded(sim, store, run.id) as (_, gateway):
            await register(http, gateway, metadata={"session_id": "live"})
            headers = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
            for taken in ("live", "stored"):
                body = {"metadata": {"session_id": taken}}
                async with http.post(
                    gateway.admin_url + "/rollouts", json=body, headers=headers
                ) as resp:
                    assert resp.status == 409
                    assert (await resp.json())["error"]["code"] == "session_exists"
            async with http.post(
                gateway.admin_url + "/rollouts", json={"metadata": {"session_id": 7}},
                headers=headers,
            ) as resp:  # fmt: skip
                assert resp.status == 400
                assert "metadata.session_id" in (await resp.json())["error"]["message"]
            assert len(gateway.rollouts()) == 1  # nothing half-registered
            assert gateway.pool.snapshot().leases == 1
        assert (await store.get_session("stored")).run_id == earlier.id  # untouched
